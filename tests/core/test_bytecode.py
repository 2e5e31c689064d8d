"""The normalized code digest: what changes it and what does not."""

from __future__ import annotations

import sys

import pytest

from flydeps._bytecode import code_digest, code_refs, find_code, iter_qualnames

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
    refs = {(r.scope, r.name, r.attrs) for r in code_refs(code)}
    assert ("global", "mod", ("sub", "fn")) in refs
    assert ("global", "helper", ()) in refs
    assert ("global", "range", ()) in refs
    src = "def g(xs):\n    return [helper(x) for x in xs]\n"
    refs = {(r.scope, r.name) for r in code_refs(find_code(compile(src, "m", "exec"), "g"))}
    assert ("global", "helper") in refs


def test_refs_record_imports_inside_functions() -> None:
    src = "def g():\n    import os.path\n    from json import dumps\n    return dumps\n"
    refs = {(r.scope, r.name, r.attrs) for r in code_refs(find_code(compile(src, "m", "exec"), "g"))}
    assert ("import", "os.path", ()) in refs
    assert ("import", "json", ("dumps",)) in refs


def test_live_and_compiled_digests_agree() -> None:
    namespace: dict = {}
    exec(compile(BASE, "/x/m.py", "exec"), namespace)
    assert code_digest(namespace["f"].__code__) == digest_of(BASE)


def test_python_version_is_part_of_the_digest_tag() -> None:
    # Bytecode differs between versions; the tag keeps digests from colliding across them.
    from flydeps import _bytecode

    assert sys.implementation.cache_tag.encode() in _bytecode._TAG
