"""The direct ``co_code`` decoder gives the same digest and references as the ``dis`` reference.

Corpus: every code object (modules, classes, functions, lambdas, comprehensions) of the
examples, the test fixtures and the standard library of the running interpreter. The
stdlib's own regression-test package (``test/``, ~60k more code objects) is included
with ``FLYDEPS_FULL_STDLIB=1``.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType

import pytest

from flydeps.code import bytecode as _bytecode
from flydeps.code import disref as _disref
from flydeps.code import scan as _codescan
from flydeps.code.bytecode import code_digest, code_refs, iter_qualnames
from flydeps.code.opcodes import TABLE

pytestmark = pytest.mark.skipif(TABLE is None, reason="no opcode tables for this interpreter: dis is the decoder")

ROOT = Path(__file__).resolve().parents[2]


def _python_files(root: Path, skip: frozenset[str] = frozenset()) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath) / name


def _codes(files: Iterator[Path]) -> Iterator[tuple[str, CodeType]]:
    for path in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError):  # lib2to3 / test data written for other grammars
            continue
        yield f"{path}::<module>", module
        for qualname, code in iter_qualnames(module):
            yield f"{path}::{qualname}", code


def _mismatches(codes: Iterator[tuple[str, CodeType]]) -> tuple[int, list[str]]:
    assert TABLE is not None
    count, bad = 0, []
    for where, code in codes:
        count += 1
        if _codescan.decode(code, TABLE) != _disref.analyze(code):
            bad.append(where)
    return count, bad


SCANEXT_BUILT = importlib.util.find_spec("flydeps.code._scanext") is not None


@pytest.fixture(params=["C loop", "Python loop"])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both decoder loops: the C one (flydeps.code._scanext, where built) and the Python one."""
    if request.param == "C loop":
        if _codescan._scanext is None:
            pytest.skip("flydeps.code._scanext is not built for this interpreter")
    else:
        monkeypatch.setattr(_codescan, "_scanext", None)
    return str(request.param)


def test_the_c_loop_is_used_where_it_was_built() -> None:
    if os.environ.get("FLYDEPS_SCANEXT", "").strip().lower() in ("0", "false", "no", "off"):
        pytest.skip("FLYDEPS_SCANEXT turns the C loop off")
    assert (_codescan._scanext is not None) == SCANEXT_BUILT


def _project_codes() -> Iterator[tuple[str, CodeType]]:
    roots = [ROOT / "src", ROOT / "examples", ROOT / "tests", ROOT / "benchmarks"]
    return (code for root in roots for code in _codes(_python_files(root)))


def _stdlib_codes() -> Iterator[tuple[str, CodeType]]:
    skip = {"site-packages"} if os.environ.get("FLYDEPS_FULL_STDLIB") == "1" else {"site-packages", "test"}
    return _codes(_python_files(Path(sysconfig.get_paths()["stdlib"]), frozenset(skip)))


def test_project_sources_examples_and_fixtures(loop: str) -> None:
    count, bad = _mismatches(_project_codes())
    assert count > 1000
    assert bad == [], bad[:20]


def test_standard_library() -> None:
    count, bad = _mismatches(_stdlib_codes())
    assert count > 10000
    assert bad == [], bad[:20]


def test_live_functions_use_the_decoder_and_agree() -> None:
    import json.decoder

    for fn in (json.decoder.JSONDecoder.raw_decode, json.decoder.py_scanstring, _python_files):  # type: ignore[attr-defined]  # untyped pure-Python fallback
        code = fn.__code__
        _bytecode._analysis.clear()
        assert code_digest(code) == _disref.code_digest(code)
        assert _bytecode._analysis.lookup(code) == _disref.analyze(code)  # digest and references
        assert code_refs(code)


def test_extended_args_and_long_jumps(loop: str) -> None:
    # > 256 constants and names, and jumps longer than 255 code units: EXTENDED_ARG prefixes.
    body = "\n".join(f"    if x == {i}:\n        y = n{i}.a{i}({i}.5)" for i in range(300))
    source = f"def f(x):\n    y = None\n{body}\n    return y\n"
    code = next(c for q, c in iter_qualnames(compile(source, "m.py", "exec")) if q == "f")
    assert TABLE is not None and TABLE.extended_arg in code.co_code[0::2]
    assert _codescan.decode(code, TABLE) == _disref.analyze(code)
    shifted = source.replace("if x == 299:", "if x == 298:")
    other = next(c for q, c in iter_qualnames(compile(shifted, "m.py", "exec")) if q == "f")
    assert code_digest(other) != code_digest(code)


def test_reference_is_the_fallback_without_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "def f(a, *, k=1):\n    return g(a, k=k) + [i for i in a]\n"
    code = next(c for q, c in iter_qualnames(compile(source, "m.py", "exec")) if q == "f")
    expected = code_digest(code)
    monkeypatch.setattr(_bytecode, "TABLE", None)
    monkeypatch.setattr(_bytecode, "_analysis", _bytecode._CodeMemo())
    assert code_digest(code) == expected


def test_layout_rules_and_odd_constants_through_both_loops(loop: str) -> None:
    """What the C loop hands back to Python (SWAP, jumps under a layout rule) and the
    constants it asks ``canonical_const`` for (floats, tuples, bytes, frozensets, code)."""
    source = (
        "def f(a, b, *args, k=2.5, **kw):\n"
        "    a, b = b, a\n"
        "    for i in range(3):\n"
        "        if i in {1, 2}:\n"
        "            break\n"
        "    else:\n"
        "        b = (1, 'x', b'y', -0.0, 1j, None, ...)\n"
        "    try:\n"
        "        s = '\\udcff' + 'é'\n"
        "    except (KeyError, ValueError) as e:\n"
        "        raise RuntimeError from e\n"
        "    g = lambda z: z + a\n"
        "    return [x for x in args if x], g, s, {**kw}\n"
    )
    code = next(c for q, c in iter_qualnames(compile(source, "m.py", "exec")) if q == "f")
    assert TABLE is not None
    assert _codescan.decode(code, TABLE) == _disref.analyze(code)


@pytest.mark.skipif(not SCANEXT_BUILT, reason="flydeps.code._scanext is not built for this interpreter")
def test_scanext_bad_input_is_a_clear_error() -> None:
    from flydeps.code import _scanext  # type: ignore[attr-defined]

    code = test_scanext_bad_input_is_a_clear_error.__code__
    with pytest.raises(TypeError, match="needs a code object and its co_code"):
        _scanext.scan("not code", code.co_code, _bytecode.canonical_const)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        _scanext.scan(code)
    tables = (*[bytes(256)] * 4, *[(None,) * 256] * 4, bytes(512), 0, 0, False, False, b"tag", 0, _bytecode.NameRef)
    with pytest.raises(TypeError, match="takes 16 arguments"):
        _scanext.configure(*tables[:13])
    with pytest.raises(TypeError, match="tag must be bytes"):
        _scanext.configure(*tables[:13], "tag", 0, _bytecode.NameRef)
    with pytest.raises(TypeError, match="name_ref must be a tuple subclass"):
        _scanext.configure(*tables[:15], dict)
    with pytest.raises(TypeError, match="kinds must be 256 bytes"):
        _scanext.configure(b"", *tables[1:])
    with pytest.raises(TypeError, match="pair_classes must be 512 bytes"):
        _scanext.configure(*tables[:8], b"", *tables[9:])
    with pytest.raises(TypeError, match="names must be a tuple of 256 items"):
        _scanext.configure(*tables[:4], (), *tables[5:])
    with pytest.raises(TypeError, match="tokens must be bytes and names str"):
        _scanext.configure(*tables)
    # A failed configure leaves the loop as it was: still decoding, still equal to dis.
    assert _codescan._scanext is None or _scanext.scan(code, code.co_code, _bytecode.canonical_const) is not None


# --- the instruction list of the import and getattr scanners (flydeps.code.bytecode) ---------

# Opnames whose argument the scanners read (bytecode._import_reads, _getattr_reads and helpers).
_SCANNERS_READ = frozenset(
    {"IMPORT_NAME", "IMPORT_FROM", "LOAD_CONST", "BUILD_LIST", "BUILD_TUPLE"}
    | _bytecode._STORES
    | _bytecode._CALL_OPS
    | _bytecode._CALLS_ONE
    | _bytecode._GLOBAL_OPS
    | _bytecode._ATTR_OPS
)


def _instruction_mismatches(codes: Iterator[tuple[str, CodeType]]) -> tuple[int, list[str]]:
    """Code objects whose directly read instruction list differs from ``dis``'s anywhere but
    at a jump (None: its target is not read) or at an argument ``dis`` renders (the raw
    integer instead) or where ``dis`` leaves an argument unresolved, and never at an
    instruction whose argument a scanner reads."""
    import dis

    assert TABLE is not None
    drop = _bytecode._IMPORT_FILLER
    count, bad = 0, []
    for where, code in codes:
        count += 1
        ours = _codescan.instructions(code, TABLE, drop)
        theirs = [i for i in dis.get_instructions(code) if i.opname not in drop]
        if ours is None or len(ours) != len(theirs):
            bad.append(f"{where}: {'unread' if ours is None else f'{len(ours)} != {len(theirs)} instructions'}")
            continue
        for (name, value), ins in zip(ours, theirs):
            if name != ins.opname:
                bad.append(f"{where}: {name} != {ins.opname} at {ins.offset}")
                break
            if value is ins.argval or (value == ins.argval and type(value) is type(ins.argval)):
                continue
            jump = ins.opcode in _disref._JUMPS and value is None
            rendered = value == ins.arg and type(value) is int and type(ins.argval) is not int
            unresolved = type(ins.argval).__name__ == "_Unknown"  # 3.11's dis leaves KW_NAMES so
            if name in _SCANNERS_READ or not (jump or rendered or unresolved):
                bad.append(f"{where}: {name} at {ins.offset}: {value!r} != {ins.argval!r}")
                break
    return count, bad


@pytest.mark.parametrize(
    ("corpus", "least"), [(_project_codes, 1000), (_stdlib_codes, 10000)], ids=["project", "stdlib"]
)
def test_scanner_instructions_agree_with_dis(corpus: Callable[[], Iterator[tuple[str, CodeType]]], least: int) -> None:
    count, bad = _instruction_mismatches(corpus())
    assert count > least
    assert bad == [], bad[:20]


def test_import_and_getattr_reads_are_the_same_through_dis(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the scanners find, on every code object of the project and the examples that
    imports or names ``getattr``, with the instructions read directly and through ``dis``."""
    roots = [ROOT / "src", ROOT / "examples", ROOT / "tests"]
    codes = [
        code
        for root in roots
        for _where, code in _codes(_python_files(root))
        if {"getattr", "import_module", "__import__", "modules"} & set(code.co_names)
        or any(name.startswith("IMPORT_") for name in (TABLE.names[op] for op in code.co_code[0::2]))  # type: ignore[union-attr]
    ]
    synthetic = (
        "def f(n):\n"
        "    import a.b as c\n"
        "    from .p import q as r, s\n"
        "    m = importlib.import_module('x.y')\n"
        "    t = __import__('u.v', globals(), None, ['w'], 0).w\n"
        "    k = sys.modules['z'].attr\n"
        "    return getattr(cfg.opts, 'tile').size, getattr(cfg, 'name'), c.d, r, s, m, t, k\n"
    )
    codes += [code for _q, code in iter_qualnames(compile(synthetic, "m.py", "exec"))]
    assert len(codes) > 300
    direct = [(_bytecode._import_reads(code), _bytecode._getattr_reads(code)) for code in codes]
    assert any(imports for imports, _ in direct) and any(reads for _, reads in direct)
    monkeypatch.setattr(_bytecode, "TABLE", None)
    assert [(_bytecode._import_reads(code), _bytecode._getattr_reads(code)) for code in codes] == direct


def test_scanner_instructions_give_way_to_dis_on_code_they_cannot_read() -> None:
    """An argument past its table, inline caches past the end: None (``dis`` is asked)."""
    assert TABLE is not None
    code = compile("import a.b as c\nx = getattr(c, 'd')\n", "m.py", "exec")
    assert _codescan.instructions(code, TABLE, frozenset()) is not None
    past = code.replace(co_names=())  # IMPORT_NAME reads co_names[0], now missing
    assert _codescan.instructions(past, TABLE, frozenset()) is None
    wide = [op for op in range(256) if TABLE.sizes[op] > 1]
    if wide:  # 3.11+: an instruction with inline caches as the last code unit
        cut = code.replace(co_code=bytes((wide[0], 0)))
        assert _codescan.instructions(cut, TABLE, frozenset()) is None
    assert [name for name, _ in _bytecode._instructions(code)][:1] == ["LOAD_CONST"]
