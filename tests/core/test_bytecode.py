"""The normalized code digest: what changes it and what does not."""

from __future__ import annotations

import sys

import pytest

from flydeps.code.bytecode import code_digest, code_refs, find_code, iter_qualnames

BASE = """
import os

def f(a, b=2):
    x = helper(a) + mod.sub.fn(b)
    for i in range(3):
        try:
            x += i
        except ValueError:
            pass
    squares = [i * i for i in range(a)]
    def inner():
        return x + len(squares)
    return inner
"""


def digest_of(source: str, qualname: str = "f", filename: str = "/a/m.py") -> str:
    code = find_code(compile(source, filename, "exec"), qualname)
    assert code is not None, qualname
    return code_digest(code)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(BASE.replace("def f(a, b=2):", "\n\n\n# moved down\ndef f(a, b=2):"), id="moved"),
        pytest.param(BASE.replace("def f(a, b=2):", 'def f(a, b=2):\n    """Docstring."""'), id="docstring"),
        pytest.param(BASE.replace("x += i", "x += i  # a comment"), id="comment"),
        pytest.param(BASE.replace("helper(a) + mod.sub.fn(b)", "(helper(a) +\n         mod.sub.fn(b))"), id="format"),
        pytest.param(BASE.replace("def f(a, b=2):", "def f(a,   b = 2) :"), id="spacing"),
    ],
)
def test_digest_ignores_layout(variant: str) -> None:
    assert digest_of(variant) == digest_of(BASE)
    assert digest_of(variant, "f.<locals>.inner") == digest_of(BASE, "f.<locals>.inner")


def test_digest_ignores_file_name() -> None:
    assert digest_of(BASE, filename="/somewhere/else.py") == digest_of(BASE)


@pytest.mark.parametrize(
    "old,new",
    [
        ("x += i", "x -= i"),
        ("range(3)", "range(4)"),
        ("helper(a)", "helper2(a)"),
        ("mod.sub.fn(b)", "mod.sub.gn(b)"),
        ("except ValueError", "except KeyError"),
        ("i * i for", "i + i for"),  # inside a comprehension: folded into f
        ("b=2", "b=3"),  # defaults are evaluated by the module code; see below
    ],
)
def test_digest_sees_code_changes(old: str, new: str) -> None:
    changed = BASE.replace(old, new)
    if old == "b=2":  # default values live on the function object, not in its code
        assert digest_of(changed) == digest_of(BASE)
        return
    assert digest_of(changed) != digest_of(BASE)


def test_nested_function_change_is_its_own() -> None:
    changed = BASE.replace("return x + len(squares)", "return x - len(squares)")
    assert digest_of(changed, "f.<locals>.inner") != digest_of(BASE, "f.<locals>.inner")
    # The parent refers to the nested function by name; the Merkle fingerprint links them.
    assert digest_of(changed) == digest_of(BASE)


def test_string_constant_that_is_not_a_docstring_counts() -> None:
    a = "def f():\n    x = 1\n    'not a docstring'\n    return 'a'\n"
    b = a.replace("return 'a'", "return 'b'")
    assert digest_of(a) != digest_of(b)


def test_lambda_constants_count() -> None:
    a = "f = lambda: 'a'\n"
    code_a = next(c for q, c in iter_qualnames(compile(a, "m", "exec")) if q == "<lambda>")
    code_b = next(c for q, c in iter_qualnames(compile(a.replace("'a'", "'b'"), "m", "exec")) if q == "<lambda>")
    assert code_digest(code_a) != code_digest(code_b)


def test_refs_follow_attribute_chains_and_comprehensions() -> None:
    code = find_code(compile(BASE, "m", "exec"), "f")
    refs = {(r.scope, r.name, r.attrs) for r in code_refs(code)}  # type: ignore[arg-type]
    assert ("global", "mod", ("sub", "fn")) in refs
    assert ("global", "helper", ()) in refs
    assert ("global", "range", ()) in refs
    src = "def g(xs):\n    return [helper(x) for x in xs]\n"
    pairs = {(r.scope, r.name) for r in code_refs(find_code(compile(src, "m", "exec"), "g"))}  # type: ignore[arg-type]
    assert ("global", "helper") in pairs


def test_refs_record_imports_inside_functions() -> None:
    src = "def g():\n    import os.path\n    from json import dumps\n    return dumps\n"
    refs = {(r.scope, r.name, r.attrs) for r in code_refs(find_code(compile(src, "m", "exec"), "g"))}  # type: ignore[arg-type]
    assert ("import", "os.path", ()) in refs
    assert ("import", "json", ("dumps",)) in refs


def test_live_and_compiled_digests_agree() -> None:
    namespace: dict = {}
    exec(compile(BASE, "/x/m.py", "exec"), namespace)
    assert code_digest(namespace["f"].__code__) == digest_of(BASE)


def test_python_version_is_part_of_the_digest_tag() -> None:
    # Bytecode differs between versions; the tag keeps digests from colliding across them.
    from flydeps.code import encoding as _bytecode

    assert sys.implementation.cache_tag.encode() in _bytecode._TAG


# Issue 7.3 / 8: every opcode argument is digested completely, on every version. Each pair
# compiles to code that behaves differently; the digests must differ.
DIFFERENT = [
    pytest.param("g(x, src=1, dst=2)", "g(x, dst=1, src=2)", id="keyword-order"),
    pytest.param("g(x, src=1)", "g(x, dst=1)", id="keyword-name"),
    pytest.param("g(x, **{'a': 1})", "g(x, **{'b': 1})", id="keyword-dict"),
    pytest.param("super().run(x)", "super(__class__, self).run(x)", id="super-two-arg-bit"),
    pytest.param("super().run", "super().run(x)", id="super-method-bit"),
    pytest.param("x < y", "x <= y", id="compare"),
    pytest.param("x == y", "x != y", id="compare-eq"),
    pytest.param("x is y", "x is not y", id="is"),
    pytest.param("x in y", "x not in y", id="contains"),
    pytest.param("x + y", "x - y", id="binary-op"),
    pytest.param("x + y", "x.__iadd__(y) if 0 else (x := x + y)", id="binary-walrus"),
    pytest.param("f'{x!r}'", "f'{x!s}'", id="format-conversion"),
    pytest.param("f'{x!r}'", "f'{x!a}'", id="format-ascii"),
    pytest.param("f'{x:>3}'", "f'{x:<3}'", id="format-spec"),
    pytest.param("f'{x}'", "f'{x:}'", id="format-empty-spec"),
    pytest.param("[*x]", "(*x,)", id="list-vs-tuple-unpack"),
    pytest.param("x[1:2]", "x[1:3]", id="slice"),
    pytest.param("x[1:2]", "x[1:2:1]", id="slice-step"),
    pytest.param("0.0", "-0.0", id="negative-zero"),
    pytest.param("1", "True", id="int-vs-bool"),
    pytest.param("1", "1.0", id="int-vs-float"),
    pytest.param("1j", "-1j", id="complex"),
    pytest.param("'a'", "b'a'", id="str-vs-bytes"),
    pytest.param("(1, 2)", "(2, 1)", id="tuple-order"),
    pytest.param("x.a", "x.b", id="attribute"),
    pytest.param("x.a()", "x.b()", id="method"),
    pytest.param("g(x)", "h(x)", id="global"),
    pytest.param("x if y else g", "x if not y else g", id="jump-polarity"),
    pytest.param("x and y", "x or y", id="bool-op"),
    pytest.param("not x", "-x", id="unary"),
    pytest.param("~x", "+x", id="unary-invert"),
    pytest.param("(lambda: x)", "(lambda: y)", id="closure-cell"),
    pytest.param("[y for y in x]", "[x for y in x]", id="comprehension-scope"),
]


def _body_digest(expr: str, *, positions: bool = False) -> str:
    src = f"class C:\n    def f(self, x, y):\n        return {expr}\n"
    code = find_code(compile(src, "m.py", "exec", dont_inherit=True), "C.f")
    assert code is not None
    return code_digest(code, positions=positions)


@pytest.mark.parametrize("a,b", DIFFERENT)
def test_every_argument_kind_is_digested(a: str, b: str) -> None:
    assert _body_digest(a) != _body_digest(b)
    assert _body_digest(a) == _body_digest(a)


STATEMENTS = [
    pytest.param(
        "try:\n    g(x)\n    h(x)\nexcept ValueError:\n    pass",
        "g(x)\ntry:\n    h(x)\nexcept ValueError:\n    pass",
        id="exception-range",
    ),
    pytest.param("for i in x:\n    g(i)\n    break", "for i in x:\n    g(i)\n    continue", id="break-continue"),
    pytest.param("a, b = x\ng(a, b)", "b, a = x\ng(a, b)", id="store-pair-order"),
    pytest.param("a = x\nb = y\ng(a + b)", "a = x\nb = y\ng(b + a)", id="load-pair-order"),
    pytest.param("global Z\nZ = x", "Z = x", id="global-store"),
    pytest.param("from . import m\ng(m)", "from .. import m\ng(m)", id="import-level"),
    pytest.param("import a.b\ng(a)", "import a.c\ng(a)", id="import-name"),
    pytest.param("raise ValueError(x)", "raise ValueError(x) from y", id="raise-from"),
    pytest.param("del x[0]", "del x[1]", id="delete-subscript"),
    pytest.param("with g(x) as a:\n    h(a)", "with g(x):\n    h(x)", id="with"),
    pytest.param(
        "def inner(q=1):\n    return q\ng(inner)", "def inner(q):\n    return q\ng(inner)", id="make-function-flags"
    ),
    pytest.param("assert x, y", "assert y, x", id="assert"),
]


def _function_digest(body: str, header: str = "def f(x, y):", prefix: str = "", positions: bool = False) -> str:
    src = prefix + header + "\n" + "".join(f"    {line}\n" for line in body.splitlines())
    code = find_code(compile(src, "m.py", "exec", dont_inherit=True), "f")
    assert code is not None
    return code_digest(code, positions=positions)


@pytest.mark.parametrize("a,b", STATEMENTS)
def test_statement_shapes_are_digested(a: str, b: str) -> None:
    assert _function_digest(a) != _function_digest(b)


@pytest.mark.parametrize(
    "a,b",
    [
        pytest.param("def f(x, y):", "def f(x, /, y):", id="positional-only"),
        pytest.param("def f(x, y):", "def f(x, *, y):", id="keyword-only"),
        pytest.param("def f(x, y):", "def f(x, *y):", id="varargs"),
        pytest.param("def f(x, y):", "def f(x, **y):", id="varkeywords"),
        pytest.param("def f(x, y):", "async def f(x, y):", id="coroutine"),
    ],
)
def test_signature_shape_and_flags_are_digested(a: str, b: str) -> None:
    assert _function_digest("return g(x, y)", header=a) != _function_digest("return g(x, y)", header=b)


def test_future_flags_are_digested() -> None:
    # compile()/exec() inside the function inherit its future flags: behaviour differs.
    plain = _function_digest("return compile(x, y, 'exec')")
    future = _function_digest("return compile(x, y, 'exec')", prefix="from __future__ import annotations\n")
    assert plain != future


def test_nan_payloads_and_signed_zero_constants() -> None:
    import math
    import struct

    from flydeps.code.bytecode import canonical_const

    assert canonical_const(0.0) != canonical_const(-0.0)
    assert canonical_const(math.nan) != canonical_const(-math.nan)
    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    assert canonical_const(math.nan) != canonical_const(other_nan)
    assert canonical_const(complex(0.0, 0.0)) != canonical_const(complex(0.0, -0.0))


def test_code_digest_rejects_non_code() -> None:
    with pytest.raises(TypeError, match="needs a code object"):
        code_digest(lambda: 1)  # type: ignore[arg-type]


# Issue 7.6: debug info carries file names and line numbers.
def test_positions_mode_sees_lines_files_and_columns() -> None:
    moved = "\n\n" + BASE
    assert digest_of(moved) == digest_of(BASE)
    code = find_code(compile(BASE, "/a/m.py", "exec"), "f")
    assert code is not None
    with_positions = code_digest(code, positions=True)
    assert with_positions != code_digest(code)
    variants = [
        (moved, "/a/m.py"),  # co_firstlineno
        (BASE, "/b/m.py"),  # co_filename, as given
        (BASE.replace("        try:", "\n        try:"), "/a/m.py"),  # a blank line inside
        (BASE.replace("    squares =", "\n    squares ="), "/a/m.py"),  # lines of a folded comprehension
    ]
    if sys.version_info >= (3, 11):  # 3.10 code objects carry no columns
        variants.append((BASE.replace("x += i", "x  +=  i"), "/a/m.py"))  # columns only
        variants.append((BASE.replace("i * i for", "i *  i for"), "/a/m.py"))  # columns in a comprehension
    for variant, filename in variants:
        other = find_code(compile(variant, filename, "exec"), "f")
        assert other is not None
        assert code_digest(other) == code_digest(code), variant
        assert code_digest(other, positions=True) != with_positions, variant
    same = find_code(compile(BASE.replace("x += i", "x += i  # note"), "/a/m.py", "exec"), "f")
    assert same is not None
    assert code_digest(same, positions=True) == with_positions


def test_positions_mode_agrees_between_live_and_compiled() -> None:
    namespace: dict = {}
    exec(compile(BASE, "/x/m.py", "exec"), namespace)
    compiled = find_code(compile(BASE, "/x/m.py", "exec"), "f")
    assert compiled is not None
    assert code_digest(namespace["f"].__code__, positions=True) == code_digest(compiled, positions=True)


def test_refs_see_super_instruction_locals() -> None:
    # 3.13 loads two locals with one instruction; the attribute applies to the second.
    src = "def g(self, other):\n    return other + self.helper(other)\n"
    refs = {(r.scope, r.name, r.attrs) for r in code_refs(find_code(compile(src, "m", "exec"), "g"))}  # type: ignore[arg-type]
    assert ("local", "self", ("helper",)) in refs


def test_memo_is_per_code_identity_not_equality() -> None:
    # Code objects compare equal across files and owners; their digests are not shared.
    src = "class A:\n    def f(self):\n        def inner():\n            return 1\n        return inner\n"
    a = find_code(compile(src, "m.py", "exec"), "A.f")
    b = find_code(compile(src.replace("class A", "class B"), "m.py", "exec"), "B.f")
    assert a is not None and b is not None
    if sys.version_info >= (3, 11):  # 3.10 code objects carry no qualified name
        assert code_digest(a) != code_digest(b)  # inner is referenced as A.f.<locals>.inner
    c = find_code(compile(src, "other.py", "exec"), "A.f")
    assert c is not None
    assert code_digest(a, positions=True) != code_digest(c, positions=True)


def test_fingerprint_positions_mode_follows_moves_in_helpers(pkg) -> None:
    # Issue 7.6: with debug info on, a helper moved down in its file changes the product.
    import flydeps

    pkg.write("deep", "def leaf(x):\n    return x + 1\n")
    pkg.write("top", f"from {pkg.name} import deep\ndef top(x):\n    return deep.leaf(x)\n")
    top = pkg.load("top")
    plain, located = flydeps.fingerprint(top.top), flydeps.fingerprint(top.top, positions=True)
    assert plain.digest != located.digest
    assert located.refresh().digest == located.digest
    pkg.edit("deep", "def leaf(x):", "# a comment line\ndef leaf(x):")
    assert flydeps.fingerprint(top.top).digest == plain.digest
    moved = flydeps.fingerprint(top.top, positions=True)
    assert moved.digest != located.digest
    assert located.refresh().digest == moved.digest  # refresh keeps the mode
    assert moved.explain(located) == (f"helper {pkg.name}.deep:leaf changed",)


def test_exit_block_copy_does_not_depend_on_layout() -> None:
    # 3.13 copies ``c = x; return x`` into the if-branch's jump only while the block's
    # line-event NOPs keep it small: ``return (`` over two lines adds one.
    one_line = "if x:\n    c = 1\nelse:\n    c = 2\nc = x\nreturn x"
    split = "if x:\n    c = 1\nelse:\n    c = 2\nc = x\nreturn (\n    x)"
    assert _function_digest(one_line) == _function_digest(split)


@pytest.mark.parametrize(
    "a,b",
    [
        pytest.param("return g(x, y)", "return g(x,\n         y)", id="operands-split"),  # 3.13 LOAD_FAST_LOAD_FAST
        pytest.param("a = x\nb = y\nreturn a + b", "a = x\nb = (\n    y)\nreturn a + b", id="store-load-split"),
        pytest.param(
            "a, b = x, y\nreturn a - b", "(a,\n b) = x, y\nreturn a - b", id="swap-stores-split"
        ),  # static SWAP
        pytest.param(  # 3.12+: the comprehension's restore of the outer ``i`` is a static SWAP
            "for i in y:\n    break\nc = [x for i in y]\nreturn c",
            "for i in y:\n    break\nc = (\n[x for i in y]\n)\nreturn c",
            id="inlined-comprehension",
        ),
    ],
)
def test_layout_dependent_compiler_choices_are_undone(a: str, b: str) -> None:
    assert _function_digest(a) == _function_digest(b)
