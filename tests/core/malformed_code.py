"""Code objects with malformed bytecode, and a child process that digests one of them.

Used by ``test_decoder_robustness.py``: a malformed ``co_code`` once crashed the process
(the C decoder read ``co_consts[-1]``), so each concrete case runs here, in a process of
its own, and prints what both decoders and ``flydeps.fingerprint`` gave as one JSON line::

    python malformed_code.py CASE

Every builder replaces the ``co_code`` (and, 3.11+, the exception table) of one small
function with instructions encoded for the running interpreter, inline caches included
(CPython writes into them when it creates or reads a code object: leaving them out
corrupts its memory before any decoder runs).
"""

from __future__ import annotations

import dis
import json
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

from flydeps.code import bytecode as _bytecode
from flydeps.code import scan as _codescan
from flydeps.code.opcodes import TABLE

EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
HAS_CACHES = TABLE is not None and max(TABLE.sizes) > 1


def base(a: Any) -> Any:
    """The function whose tables the cases index: 2+ constants, 1 name, 2 locals."""
    b = 7
    return len(a) + b


def unit(name: str, arg: int = 0) -> bytes:
    """One instruction of this interpreter, its inline caches (zeroed) after it."""
    op = dis.opmap[name]
    size = TABLE.sizes[op] if TABLE is not None else 1
    return bytes((op, arg)) + bytes(2 * (size - 1))


def prefixed(name: str, chain: Sequence[int]) -> bytes:
    """``name`` after one EXTENDED_ARG per byte of ``chain`` but the last (its own byte)."""
    return b"".join(bytes((EXTENDED_ARG, byte)) for byte in chain[:-1]) + unit(name, chain[-1])


def rebuilt(raw: bytes, exceptions: bytes = b"") -> types.FunctionType:
    """``base`` with ``raw`` as its bytecode (and ``exceptions`` as its exception table, 3.11+)."""
    if exceptions and sys.version_info < (3, 11):
        raise ValueError("code objects have no exception table before 3.11")
    extra: dict[str, Any] = {"co_exceptiontable": exceptions} if sys.version_info >= (3, 11) else {}
    code = base.__code__.replace(co_code=raw, **extra)
    return types.FunctionType(code, base.__globals__, "base")


def _return() -> bytes:
    return unit("LOAD_FAST", 0) + unit("RETURN_VALUE")


def _name_index(index: int) -> int:
    """LOAD_GLOBAL's argument for name ``index`` (3.11+ pack a flag bit under it)."""
    return index << TABLE.shifts[dis.opmap["LOAD_GLOBAL"]] if TABLE is not None else index


CASES: dict[str, Callable[[], types.FunctionType]] = {
    # The reproducer: eight EXTENDED_ARG 0xff prefixes (a 72-bit argument).
    "eight_extended_args": lambda: rebuilt(prefixed("LOAD_CONST", [0xFF] * 9) + _return()),
    # The widest argument the interpreter reads as written: a valid chain, a missing constant.
    "widest_argument": lambda: rebuilt(prefixed("LOAD_CONST", [0x7F, 0xFF, 0xFF, 0xFF]) + _return()),
    # One bit wider: the interpreter's 32-bit argument would read a negative index.
    "argument_past_32_bits": lambda: rebuilt(prefixed("LOAD_CONST", [0x80, 0, 0, 0]) + _return()),
    # Leading zero prefixes, however many: the argument the interpreter reads is 0.
    "zero_prefixes": lambda: rebuilt(prefixed("LOAD_CONST", [0] * 9) + _return()),
    "no_prefixes": lambda: rebuilt(prefixed("LOAD_CONST", [0]) + _return()),
    "constant_past_the_table": lambda: rebuilt(prefixed("LOAD_CONST", [1, 0]) + _return()),
    "name_past_the_table": lambda: rebuilt(unit("LOAD_GLOBAL", _name_index(100)) + _return()),
    "local_past_the_table": lambda: rebuilt(unit("LOAD_FAST", 200) + unit("RETURN_VALUE")),
    "jump_past_the_end": lambda: rebuilt(unit("JUMP_FORWARD", 200) + _return()),
    "jump_before_the_start": lambda: rebuilt(_return() + unit("JUMP_BACKWARD", 200)),
    "odd_length": lambda: rebuilt(_return() + b"\x09"),
    "exception_table_cut": lambda: rebuilt(_return(), b"\x40"),
    "exception_field_too_wide": lambda: rebuilt(_return(), b"\x7f" * 12 + b"\x3f" + b"\x00" * 3),
    "exception_table_valid": lambda: rebuilt(_return(), b"\x00\x02\x00\x00"),
}


def outcome(call: Callable[[], object]) -> list[Any]:
    """``["ok", value]`` or ``["raised", exception type, message]``."""
    try:
        return ["ok", call()]
    except Exception as error:  # noqa: BLE001 - what was raised is the observation
        return ["raised", type(error).__name__, str(error)]


def decoders(function: types.FunctionType) -> dict[str, list[Any]]:
    """What the C loop (with its fallback), the Python loop and ``fingerprint`` give."""
    import flydeps

    code = function.__code__
    results = {
        "c": outcome(lambda: list(_codescan.decode(code, TABLE))),  # type: ignore[arg-type]
        "python": outcome(lambda: list(_codescan.assemble(code, _codescan._scan(code, TABLE)))),  # type: ignore[arg-type]
        "fingerprint": outcome(lambda: flydeps.fingerprint(function).digest),
    }
    if _codescan._scanext is not None:  # the C loop alone: a result, or None (it defers)
        scan = outcome(lambda: _codescan._scanext.scan(code, code.co_code, _bytecode.canonical_const))
        results["c_alone"] = scan if scan[0] == "raised" else ["ok", "deferred" if scan[1] is None else "decoded"]
    return results


def main(case: str) -> None:
    """Print the JSON outcome of digesting case ``case``; exit 0 unless the process crashed."""
    try:
        function = CASES[case]()
    except (ValueError, KeyError) as error:  # the interpreter refuses it (e.g. 3.11+: odd length)
        print(json.dumps({"refused": f"{type(error).__name__}: {error}"}))
        return
    json.dump(decoders(function), sys.stdout, default=str)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
