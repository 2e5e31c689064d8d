"""Malformed bytecode: both decoders give the same digest or the same clean error, never a crash.

The contract (``flydeps.errors.MalformedCodeError``, docs/design.md "Decoding in C"): an
argument is what the interpreter reads (its EXTENDED_ARG prefixes' bytes, then its own);
one wider than 31 bits, an index past ``co_consts`` / ``co_names`` / the variables, a jump
outside the code, an odd-length ``co_code``, cut inline caches and a cut or over-wide
exception-table field are malformed. Leading zero prefixes, however many, are not.

* Concrete cases run in a child process (``malformed_code.py``): a crash there fails the
  test with its signal instead of killing pytest. The C loop alone must defer each
  malformed case to the Python loop (which raises), and ``flydeps.fingerprint`` must raise
  the same error.
* A property test builds code objects from generated instructions (any opcode of this
  interpreter, EXTENDED_ARG chains of up to twelve prefixes, generated exception tables)
  and requires the C loop (with its fallback) and the Python loop to agree exactly.
"""

from __future__ import annotations

import dis
import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from flydeps.code import bytecode as _bytecode
from flydeps.code import scan as _codescan
from flydeps.code.opcodes import TABLE
from flydeps.errors import DiscoveryError, MalformedCodeError

pytestmark = pytest.mark.skipif(TABLE is None, reason="no opcode tables for this interpreter: dis is the decoder")

CHILD = Path(__file__).with_name("malformed_code.py")
sys.path.insert(0, str(CHILD.parent))
import malformed_code  # noqa: E402

# Each malformed case and the problem its error must name.
MALFORMED = {
    "eight_extended_args": r"EXTENDED_ARG chain carries an argument wider than 0x7fffffff",
    "argument_past_32_bits": r"EXTENDED_ARG chain carries an argument wider than 0x7fffffff",
    "widest_argument": r"LOAD_CONST reads entry 2147483647, past the end of co_consts",
    "constant_past_the_table": r"LOAD_CONST reads entry 256, past the end of co_consts",
    "name_past_the_table": r"LOAD_GLOBAL reads entry 100, past the end of co_names",
    "local_past_the_table": r"LOAD_FAST reads entry 200, past the end of",
    "jump_past_the_end": r"JUMP_FORWARD jumps to code unit 201, outside the code",
    "jump_before_the_start": r"JUMP_BACKWARD jumps to code unit -\d+, outside the code",
    "odd_length": r"co_code has an odd length \(5 bytes\)",
    "exception_table_cut": r"in its exception table: an entry is cut at byte 1",
    "exception_field_too_wide": r"in its exception table: a field ending at byte 6 .* is wider than 0x7fffffff",
}


def _child(case: str, **env: str) -> dict[str, Any]:
    """The outcome of case ``case`` digested in a process of its own (a crash fails here)."""
    run = subprocess.run(
        [sys.executable, str(CHILD), case], capture_output=True, text=True, env={**_environ(), **env}, check=False
    )
    assert run.returncode == 0, f"digesting {case!r} ended the process (exit {run.returncode}):\n{run.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(run.stdout)
    if "refused" in result:
        pytest.skip(f"this interpreter does not build {case!r}: {result['refused']}")
    return result


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "FLYDEPS_SCANEXT"}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_code_is_one_clean_error_from_both_decoders(case: str) -> None:
    result = _child(case)
    c, python, fingerprint = result["c"], result["python"], result["fingerprint"]
    assert python[:2] == ["raised", "MalformedCodeError"], python
    assert c == python, "the C loop and the Python loop disagree"
    assert re.search(MALFORMED[case], python[2]), python[2]
    assert "cannot digest base (" in python[2] and "malformed_code.py:" in python[2]
    assert fingerprint == python, "flydeps.fingerprint raises the decoder's error"
    if "c_alone" in result:  # the C loop reads nothing past a table: it leaves the case to Python
        assert result["c_alone"] == ["ok", "deferred"]


def test_the_python_loop_alone_gives_the_same_error() -> None:
    """FLYDEPS_SCANEXT=0: fingerprint goes through the Python loop only, same message."""
    built = _child("eight_extended_args")
    alone = _child("eight_extended_args", FLYDEPS_SCANEXT="0")
    assert "c_alone" not in alone
    assert alone["fingerprint"] == built["fingerprint"] == built["python"]


def test_leading_zero_prefixes_and_a_valid_exception_table_are_accepted() -> None:
    """Nine zero prefixes are the argument 0: the digest of the code without them."""
    zero, plain = _child("zero_prefixes"), _child("no_prefixes")
    assert zero["c"][0] == "ok" and zero["c"] == zero["python"] == plain["c"] == plain["python"]
    assert zero["fingerprint"] == plain["fingerprint"]
    if "c_alone" in zero:
        assert zero["c_alone"] == ["ok", "decoded"]
    valid = _child("exception_table_valid")
    assert valid["c"][0] == "ok" and valid["c"] == valid["python"]


def test_the_error_is_a_discovery_error_and_a_value_error() -> None:
    function = malformed_code.CASES["constant_past_the_table"]()
    with pytest.raises(MalformedCodeError) as raised:
        _codescan.assemble(function.__code__, _codescan._scan(function.__code__, TABLE))  # type: ignore[arg-type]
    assert issubclass(MalformedCodeError, DiscoveryError) and issubclass(MalformedCodeError, ValueError)
    assert (raised.value.offset, raised.value.code.split(" (")[0]) == (2, "base")
    assert raised.value.problem.startswith("LOAD_CONST reads entry 256")


class _CutCode:
    """A code object whose ``co_code`` lacks its last inline caches: CPython itself writes
    past such a buffer when it creates or reads one, so only the bytes are replaced here."""

    def __init__(self, code: types.CodeType, raw: bytes) -> None:
        self._code, self.co_code = code, raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._code, name)


@pytest.mark.skipif(not malformed_code.HAS_CACHES, reason="no inline caches before 3.11")
def test_cut_inline_caches_are_malformed_for_both_loops() -> None:
    raw = malformed_code.unit("LOAD_FAST", 0) + malformed_code.unit("LOAD_ATTR", 0)[:2]
    code = malformed_code.base.__code__
    with pytest.raises(MalformedCodeError, match="LOAD_ATTR's inline caches run past the end of co_code"):
        _codescan._scan(_CutCode(code, raw), TABLE)  # type: ignore[arg-type]
    if _codescan._scanext is not None:
        assert _codescan._scanext.scan(code, raw, _bytecode.canonical_const) is None


@pytest.mark.skipif(_codescan._scanext is None, reason="flydeps.code._scanext is not built for this interpreter")
def test_the_c_loop_reads_only_inside_its_arguments() -> None:
    ext, code = _codescan._scanext, malformed_code.base.__code__
    assert ext.scan(code, code.co_code + b"\x09", _bytecode.canonical_const) is None  # odd: deferred
    assert ext.scan(code, b"", _bytecode.canonical_const) is not None  # no instruction: a header only
    long_chain = bytes((malformed_code.EXTENDED_ARG, 0xFF)) * 4096 + malformed_code.unit("LOAD_CONST", 0)
    assert ext.scan(code, long_chain, _bytecode.canonical_const) is None


@pytest.mark.skipif(_codescan._scanext is None, reason="flydeps.code._scanext is not built for this interpreter")
def test_the_c_tables_are_validated_and_not_replaced_during_a_scan() -> None:
    ext = _codescan._scanext
    code = malformed_code.CASES["no_prefixes"]().__code__  # LOAD_CONST 0; LOAD_FAST 0; RETURN_VALUE
    expected = _codescan.decode(code, TABLE)  # type: ignore[arg-type]
    tables = _codescan._scanext_tables()
    with pytest.raises(ValueError, match="name-flag shift of opcode 0 is above 31"):
        ext.configure(*tables[:2], b"\x40" + bytes(255), *tables[3:])
    with pytest.raises(ValueError, match="extended_arg must be an opcode"):
        ext.configure(*tables[:9], 256, *tables[10:])
    refused: list[BaseException] = []

    def const_token(value: object) -> bytes:  # Python code the C loop calls mid-scan
        try:
            ext.configure(*tables)
        except RuntimeError as error:
            refused.append(error)
        return _bytecode.canonical_const(value)

    odd = code.replace(co_consts=(1.5, *code.co_consts[1:]))  # a constant const_token encodes
    assert ext.scan(odd, odd.co_code, const_token) is not None
    assert refused and "called while scan() runs" in str(refused[0])
    assert _codescan.decode(code, TABLE) == expected  # type: ignore[arg-type]  # the tables are as they were


# ---- the property test --------------------------------------------------------------------

_DEOPT = getattr(dis, "_deoptop", lambda op: op)
OPCODES = sorted(
    op
    for name, op in dis.opmap.items()
    if op < 256 and _DEOPT(op) == op and not name.startswith(("INSTRUMENTED", "ENTER_EXECUTOR"))
)


def _closure_base(p: Any) -> Any:
    q = p

    def inner(r: Any) -> Any:
        import os.path as osp

        try:
            return osp.join(p, q, r, str(1.5), "x")
        except TypeError:
            return None

    return inner


BASES = (malformed_code.base, _closure_base, _closure_base(1))
BYTE = st.one_of(st.just(0), st.integers(0, 255))
CHAIN = st.lists(BYTE, max_size=3) | st.lists(st.just(0), max_size=12) | st.lists(BYTE, max_size=12)
INSTRUCTION = st.tuples(st.sampled_from(OPCODES), st.integers(0, 40) | BYTE, st.lists(BYTE, max_size=0) | CHAIN)


def _varint(value: int) -> bytes:
    """An exception-table field as CPython writes it (6 bits a byte, bit 6: more follow)."""
    chunks = [value & 63]
    while value >> 6:
        value >>= 6
        chunks.append(value & 63)
    return bytes(chunk | (64 if k else 0) for k, chunk in reversed(list(enumerate(chunks))))


ENTRY = st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 9))
EXCEPTIONS = st.one_of(
    st.just(b""),
    st.lists(ENTRY, max_size=3).map(lambda entries: b"".join(_varint(f) for entry in entries for f in entry)),
    st.binary(max_size=16),
)


def _encode(instructions: list[tuple[int, int, list[int]]]) -> bytes:
    """Each instruction after its EXTENDED_ARG prefixes, its inline caches (zeroed) after it."""
    out = bytearray()
    for op, arg, chain in instructions:
        for byte in chain:
            out += bytes((malformed_code.EXTENDED_ARG, byte))
        out += bytes((op, arg)) + bytes(2 * (TABLE.sizes[op] - 1))  # type: ignore[union-attr]
    return bytes(out)


def _outcome(call: Any) -> list[Any]:
    try:
        return ["ok", call()]
    except MalformedCodeError as error:
        return ["raised", str(error)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    instructions=st.lists(INSTRUCTION, min_size=1, max_size=24),
    exceptions=EXCEPTIONS,
)
@example(base=malformed_code.base, instructions=[(dis.opmap["LOAD_CONST"], 0, [0xFF] * 8)], exceptions=b"")
@example(base=malformed_code.base, instructions=[(dis.opmap["LOAD_CONST"], 0xFF, [0x7F, 0xFF, 0xFF])], exceptions=b"")
def test_both_loops_agree_on_generated_code(base: Any, instructions: Any, exceptions: bytes) -> None:
    """The same digest and references, or the same MalformedCodeError; any other
    exception is a failure (and a crash ends the run)."""
    extra: dict[str, Any] = {"co_exceptiontable": exceptions} if sys.version_info >= (3, 11) else {}
    code = base.__code__.replace(co_code=_encode(instructions), **extra)
    python = _outcome(lambda: _codescan.assemble(code, _codescan._scan(code, TABLE)))  # type: ignore[arg-type]
    event("digested" if python[0] == "ok" else python[1].split(": ")[2].split(" ")[0])  # what was malformed
    assert _outcome(lambda: _codescan.decode(code, TABLE)) == python  # type: ignore[arg-type]
