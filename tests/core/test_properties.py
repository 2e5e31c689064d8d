"""Property tests: generated helper packages, mutated at random.

A generated package has modules of small helper functions calling each other (and
reading module constants); a root function reaches some of them. Mutating the code of
any reachable helper must change the root's digest; mutating an unreachable helper, or
only comments/docstrings/blank lines anywhere, must not.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flydeps

_ids = itertools.count()


@dataclass(frozen=True)
class Helper:
    module: int
    index: int
    calls: tuple[int, ...]  # indices of helpers this one calls (global numbering)
    const: int

    @property
    def name(self) -> str:
        return f"h{self.index}"


@st.composite
def packages(draw):
    n_modules = draw(st.integers(1, 4))
    n_helpers = draw(st.integers(2, 12))
    helpers = []
    for i in range(n_helpers):
        calls = draw(st.lists(st.integers(0, n_helpers - 1), max_size=3, unique=True))
        helpers.append(Helper(draw(st.integers(0, n_modules - 1)), i, tuple(calls), draw(st.integers(0, 9))))
    roots = draw(st.lists(st.integers(0, n_helpers - 1), min_size=1, max_size=3, unique=True))
    target = draw(st.integers(0, n_helpers - 1))
    trivia = draw(st.sampled_from(["comment", "docstring", "blank"]))
    return n_modules, helpers, tuple(roots), target, trivia


def render(
    name: str, n_modules: int, helpers: list[Helper], mutate: int | None = None, trivia: str = ""
) -> dict[str, str]:
    files = {}
    for m in range(n_modules):
        lines = [f"from {name} import " + ", ".join(f"mod{k}" for k in range(n_modules)) if n_modules else ""]
        for h in (h for h in helpers if h.module == m):
            body = " + ".join([f"mod{helpers[c].module}.{helpers[c].name}(x - 1)" for c in h.calls] or ["0"])
            const = h.const + (1 if mutate == h.index else 0)
            if trivia == "comment":
                lines.append(f"# helper {h.index}")
            lines.append(f"def {h.name}(x):")
            if trivia == "docstring":
                lines.append(f"    '''Helper {h.index}.'''")
            lines.append(f"    if x <= 0:\n        return {const}\n    return {body}\n")
            if trivia == "blank":
                lines.append("\n\n")
        files[f"mod{m}"] = "\n".join(lines) + "\n"
    return files


def reachable(helpers: list[Helper], roots: tuple[int, ...]) -> set[int]:
    seen, stack = set(), list(roots)
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(helpers[i].calls)
    return seen


def load_digest(tmp, files: dict[str, str], name: str, helpers: list[Helper], roots: tuple[int, ...]) -> str:
    tmp = tmp / f"v{next(_ids)}"  # same package name, a fresh directory per variant
    pkg_dir = tmp / name
    pkg_dir.mkdir(parents=True)
    (pkg_dir / "__init__.py").write_text("")
    for mod, text in files.items():
        (pkg_dir / f"{mod}.py").write_text(text)
    sys.path.insert(0, str(tmp))
    try:
        importlib.invalidate_caches()
        mods = [importlib.import_module(f"{name}.{m}") for m in sorted(files)]
        by_index = {h.index: getattr(mods[h.module], h.name) for h in helpers}
        fp = flydeps.fingerprint(tuple(by_index[r] for r in roots))
        return fp.digest
    finally:
        sys.path.remove(str(tmp))
        for mod in [m for m in sys.modules if m.split(".")[0] == name]:
            del sys.modules[mod]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(packages())
def test_digest_tracks_exactly_the_reachable_code(tmp_path, spec) -> None:
    n_modules, helpers, roots, target, trivia = spec
    name = f"genpkg{next(_ids)}"
    base = load_digest(tmp_path, render(name, n_modules, helpers), name, helpers, roots)
    mutated = load_digest(tmp_path, render(name, n_modules, helpers, mutate=target), name, helpers, roots)
    trivial = load_digest(tmp_path, render(name, n_modules, helpers, trivia=trivia), name, helpers, roots)
    assert trivial == base, "comments, docstrings and blank lines never change the digest"
    if target in reachable(helpers, roots):
        assert mutated != base, f"helper h{target} is reachable from {roots}"
    else:
        assert mutated == base, f"helper h{target} is not reachable from {roots}"


@st.composite
def graphs(draw):
    """Random dependency graphs, cycles and self-loops included, nodes in random order."""
    from flydeps.graph import DepGraph, Edge, EdgeKind, Node, NodeKind

    n = draw(st.integers(1, 14))
    ids = [f"m:f{i}" for i in range(n)]
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n, unique=True))
    order = draw(st.permutations(ids))
    nodes = {nid: Node(nid, NodeKind.FUNCTION, f"d{nid}") for nid in order}
    edges = tuple(Edge(ids[a], ids[b], EdgeKind.CALLS, f"f{b}") for a, b in pairs)
    roots = (ids[draw(st.integers(0, n - 1))],)
    return DepGraph(roots, nodes, edges)


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_depth_first_and_component_digests_agree(graph) -> None:
    """Differential: the one-pass depth-first digests (acyclic graphs) equal the
    per-component digests, which also serve graphs with cycles."""
    import importlib

    fingerprint_module = importlib.import_module("flydeps.keys.fingerprint")
    assert dict(fingerprint_module.transitive_digests(graph)) == dict(fingerprint_module._digests_by_component(graph))
