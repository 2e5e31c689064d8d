"""``flydeps aot plan``: which specializations of a manifest a built directory holds, and
which the working tree (or the commits since a revision) invalidates, without tracing,
compiling or importing a kernel.

Contract
--------
Inputs: a manifest (:mod:`flydsl_runtime.persist.manifest`, JSON lines), an AOT build's
directory ``DIR`` (its persistent index, :mod:`flydsl_runtime.persist.index`), the arches
to plan for (default: every arch ``DIR`` holds), the source roots the launchers' modules
are found under (default: the current directory), and optionally a git revision.

Each (manifest entry, arch) is one *unit*, whose status is one of:

* ``present``: a row of ``DIR`` is that specialization (:func:`_candidates`: same launcher,
  arch, arguments, hints; with the environment the entry records) and nothing it lists
  changed;
* ``invalidated``: a row is that specialization but
  (a) without ``since``, a node of the dependency graph its ``detail`` lists has another
  static digest in the working tree than the digest stored in the row, where the two can be
  compared (a function's code, a global bound to a literal);
  (b) what changed between the sources the row was built on and the working tree (without
  ``since``: the build's source snapshot, :mod:`.sources`, for the rows that build made or
  served; with it: revision ``since`` against the files git tracks): a node the row lists
  whose transitive static digest differs (each node under it that changed, was added or
  removed is named: a global bound to an expression or rebound under module-level control
  flow, a helper added below it); the module-level statements binding the name the entry is
  reached by (``QUANT`` of ``...:QUANT.launch``, a builder's call), following the
  module-level names they read; a module-level write of ``os.environ`` (in the graph's
  modules and their packages' ``__init__``, run on import) of a variable the row's trace
  read; or (c) without ``since``, a file or directory listing the trace read (the row's
  derived reads ``=file:``/``=listdir:``/``=stat:``, a tuning table) reads otherwise now (a
  relative path re-read from the current directory, as a runtime would); or (d) no row of
  it has the code-generation variables or ``os.environ`` reads the entry records (each
  difference named);
* ``missing``: no row of ``DIR`` is that specialization (to build).

A present unit whose row no source snapshot covers (a directory built before snapshots, a
damaged or refused ``aot-sources.json``, a row another build made) lists the nodes it could
not judge (``unchecked``: bound to an expression); ``--exit-code`` fails on them too, and the
plan says how to get a snapshot (build again: what is served is not rebuilt).

The static digests come from :func:`flydeps.static.analyze`, whose node digests are the
runtime's own (the static front-end's contract). A node the static graph does not have
(a runtime-only node: a wrapper object, a closure cell's value) is judged through what
reaches it: a changed helper changes the digest of the function that calls it, a closure
value the builder's call. What the plan cannot see: a module-level statement that changes
what a trace reads other than by binding a name or writing ``os.environ`` (a file a
module-level statement writes, process state set by a library on import); the strict
runtime names it (docs/guarantees.md).

Matching an entry to rows without importing its launcher (:func:`_candidates`, the one
place that reads the manifest's forms against a row's ``detail``): the row's launcher is
``module.qualname`` of the traced function; an import path names it directly
(``kernels.realworld.norms:rmsnorm``), through an instance (``...quant:QUANT.launch`` ->
``...quant.Fp8Quant.launch``: same module and method name), or through a builder
(``...softmax:softmax_w4`` -> ``...softmax.build_softmax.<locals>.softmax``: a launcher of
the module defined in a function). Positional arguments follow the row's parameters in
order; a tensor matches by dtype and rank, a compile-time scalar by type and value, a
dynamic scalar by its type only; a parameter the entry omits (left at its default) is not
compared. Two launchers one builder made (``softmax_w4 = build_softmax(4)``,
``softmax_w4_scaled = build_softmax(4, scale=0.5, use_exp2=True)``) are told apart by the
builder call's literal arguments (read from the module's source with :mod:`ast`) against the
closure values the row lists; what is still ambiguous is judged by its best candidate (a
present one if any).

:func:`plan` computes a :class:`Plan`; :func:`run` is the CLI
(``flydeps aot plan``): a text summary or ``--format json`` (schema
``flydeps.aot-plan/1``), exit 1 with ``--exit-code`` when anything must be (re)built, 2 on
bad input (an unreadable manifest or index, a bad manifest line, a revision git does not
know: one line naming the file[:line] or the argument). Reads only.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flydeps.errors import FlydepsError
from flydeps.graph import DepGraph, NodeKind
from flydeps.static.analyze import outside_imports
from flydeps.static.results import Analysis

from ..persist import index as _index
from ..persist import manifest as _manifest

__all__ = [
    "JSON_SCHEMA",
    "Plan",
    "PlanError",
    "Reason",
    "Unit",
    "plan",
    "render_json",
    "render_text",
    "run",
]

log = logging.getLogger("flydsl_runtime")

JSON_SCHEMA = "flydeps.aot-plan/1"
EXIT_OK, EXIT_REBUILD, EXIT_BAD_INPUT = 0, 1, 2
_DERIVED = "="  # flydeps.observe.environ.DERIVED: a derived read (not an environment variable)


class PlanError(FlydepsError, ValueError):
    """Input the plan cannot be computed from: the message names the file[:line] or argument."""


@dataclass(frozen=True)
class Reason:
    """Why a unit must be rebuilt: ``kind`` is ``helper``, ``global`` or ``library`` (a node of
    the row's graph: ``node`` its id, ``location`` its ``file:line``), ``env`` (a code-generation
    variable) or ``environ`` (a read of ``os.environ``); ``text`` says it whole."""

    kind: str
    text: str
    node: str = ""
    location: str = ""


@dataclass(frozen=True)
class Unit:
    """One manifest entry for one arch, and what the plan says about it."""

    launcher: str  # the entry's import path
    where: str  # manifest file:line
    arch: str
    status: str  # present | invalidated | missing
    row_launcher: str = ""  # the row's launcher (module.qualname), when one matched
    row_key: str = ""
    reasons: tuple[Reason, ...] = ()
    # What of a present unit's row this plan could not judge: nodes bound to an expression (no
    # value to compare with the row's digest) where no source snapshot of the build covers
    # them, and modules the row's code imports that are outside the project and not installed
    # (``unchecked_why`` says which).
    unchecked: tuple[str, ...] = ()
    unchecked_why: str = "not judged without the build's source snapshot"

    def line(self) -> str:
        head = f"{self.status:11} {self.launcher} [{self.arch}] ({self.where})"
        if self.status == "missing":
            return f"{head}: no specialization in DIR"
        if self.status == "present" and self.unchecked:
            shown = ", ".join(self.unchecked[:3]) + (
                f" and {len(self.unchecked) - 3} more" if len(self.unchecked) > 3 else ""
            )
            return (
                f"{'unchecked':11} {self.launcher} [{self.arch}] ({self.where}): present by every digest this plan "
                f"could compare; {self.unchecked_why}: {shown}"
            )
        return f"{head}: " + "; ".join(r.text for r in self.reasons)


@dataclass(frozen=True)
class Plan:
    directory: str
    manifest: str
    since: str | None
    arches: tuple[str, ...]
    absent_arches: tuple[str, ...]  # asked for, no row of DIR has them
    units: tuple[Unit, ...]
    unnamed: tuple[str, ...] = ()  # manifest lines of calls that cannot be built (file:line: why)
    diagnostics: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = ()  # what this plan could not judge, and what to do (printed)

    def count(self, status: str) -> int:
        return sum(u.status == status for u in self.units)

    def unchecked(self) -> int:
        """The present units with something this plan could not judge (``Unit.unchecked``)."""
        return sum(u.status == "present" and bool(u.unchecked) for u in self.units)

    @property
    def rebuild(self) -> bool:
        """Whether ``--exit-code`` fails: a unit to (re)build, or one that could not be judged."""
        return any(u.status != "present" or u.unchecked for u in self.units)


# --- rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    key: str
    launcher: str
    arch: str
    reads: tuple[tuple[str, str | None], ...]
    detail: Mapping[str, Any]


def _rows(directory: Path) -> list[_Row]:
    """The rows of ``DIR``'s index with a usable ``detail``; a row without one is a warning
    naming it (as ``flydeps aot list`` names it), not a failure of the plan."""
    if directory.exists() and not directory.is_dir():
        raise PlanError(f"{directory} is a file, not the --out DIR of an AOT build")
    path = directory / _index.INDEX_NAME
    try:
        stored = _index.read_rows(path)
    except _index.IndexReadError as error:
        raise PlanError(str(error)) from None
    out = []
    for number, (key, reads_text, launcher, _ir, _created, _py, detail_text) in enumerate(stored, 1):
        try:
            detail = json.loads(detail_text)
            reads = json.loads(reads_text)
            if not isinstance(detail, dict) or not isinstance(detail.get("nodes"), dict):
                raise ValueError("detail has no nodes")
            if not isinstance(detail.get("args"), dict) or not isinstance(detail.get("arch"), str):
                raise ValueError("detail has no args or arch")
            pairs = tuple((str(n), v if v is None else str(v)) for n, v in reads)
        except (ValueError, TypeError, RecursionError) as problem:
            log.warning("%s: row %d (launcher %s) not planned: %s", path, number, launcher, problem)
            continue
        out.append(_Row(key, launcher, detail["arch"], pairs, detail))
    return out


# --- matching an entry to rows (the one place coupled to the manifest's value forms) ----


def _candidates(
    entry: _manifest.ManifestEntry, arch: str, rows: Sequence[_Row], source: Path | None = None
) -> list[_Row]:
    """The rows of ``arch`` that are ``entry``'s specialization up to its environment;
    ``source``: the file of the entry's module (read for a builder's arguments)."""
    module, _, qual = entry.launcher.partition(":")
    same_arch = [r for r in rows if r.arch == arch and r.launcher.startswith(module + ".")]
    exact = [r for r in same_arch if r.launcher == f"{module}.{qual}"]
    if not exact:  # through an instance (QUANT.launch -> Fp8Quant.launch) or a builder
        last = qual.rpartition(".")[2]
        exact = [r for r in same_arch if "." in qual and r.launcher.rpartition(".")[2] == last]
        if not exact and "." not in qual:
            made = _builder_arguments(source, qual) if source is not None else None
            exact = [r for r in same_arch if ".<locals>." in r.launcher and _made_by(r, module, made)]
    return [r for r in exact if _same_call(entry, r.detail)]


def _builder_arguments(source: Path, name: str) -> tuple[str, dict[str, str]] | None:
    """``name = builder(4, scale=0.5)`` at the top level of ``source``, with ``builder`` a
    function defined there: ``(builder, {parameter: repr of its literal value})``, defaults
    included; None when ``name`` is bound otherwise (then builder-made rows are not told apart)."""
    import ast

    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    call = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            call = node.value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.func.id not in functions:
        return None
    spec = functions[call.func.id].args
    params = [a.arg for a in (*spec.posonlyargs, *spec.args)]
    values: dict[str, ast.expr] = dict(zip(params[len(params) - len(spec.defaults) :], spec.defaults))
    values.update(zip(params, call.args))
    values.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    shown = {}
    for param, expr in values.items():
        try:
            shown[param] = repr(ast.literal_eval(expr))
        except ValueError:  # not a literal: not compared
            continue
    return call.func.id, shown


def _made_by(row: _Row, module: str, made: tuple[str, dict[str, str]] | None) -> bool:
    """Whether the builder-made launcher of ``row`` was built with the literal arguments
    ``made`` names: each closure cell of the builder's code the row lists (``...#closure.P``,
    its value's summary) agrees with the argument ``P``."""
    if made is None:
        return True
    builder, values = made
    prefix = f"{module}:{builder}.<locals>."
    for nid, part in row.detail["nodes"].items():
        if not nid.startswith(prefix) or "#closure." not in nid:
            continue
        param = nid.rpartition("#closure.")[2]
        if param in values and isinstance(part, list) and len(part) > 3 and part[3] != values[param]:
            return False
    return True


def _same_call(entry: _manifest.ManifestEntry, detail: Mapping[str, Any]) -> bool:
    params: dict[str, Any] = detail.get("args", {})
    names = list(params)
    args, kwargs = entry.field("args"), entry.field("kwargs")
    if len(args) > len(names):
        return False
    given = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in params:
            return False
        given[name] = value
    if not all(_value_matches(value, params[name]) for name, value in given.items()):
        return False
    hints = entry.field("hints")
    stored = detail.get("hints")
    if hints and isinstance(stored, list) and stored[:1] == ["t"]:
        pairs = {}
        for item in stored[1]:
            if isinstance(item, list) and item[:1] == ["t"] and len(item[1]) == 2 and item[1][0][:1] == ["s"]:
                pairs[item[1][0][1]] = item[1][1]
        return set(pairs) == set(hints) and all(_scalar_matches(v, pairs[k]) for k, v in hints.items())
    return not hints or stored is None


def _value_matches(value: object, sig: object) -> bool:
    """A manifest value form against a row's argument signature (index._canonical form)."""
    if not isinstance(sig, list) or not sig:
        return False
    if isinstance(value, dict) and "tensor" in value:
        body = value["tensor"]
        items = sig[1] if sig[0] == "t" else []
        if len(items) == 6 and items[0][:1] == ["c"] and items[1][:1] == ["d"]:
            rank = len(items[4][1]) if items[4][:1] == ["t"] else -1
            return bool(items[1][1] == f"torch.{body['dtype']}" and rank == len(body["shape"]))
        return True  # another FlyDSL's tensor signature: not compared
    if sig[0] == "t" and len(sig[1]) == 2 and sig[1][0][:1] == ["c"]:  # (type, value): compile-time
        return _scalar_matches(value, sig[1][1])
    if sig[0] == "t" and len(sig[1]) == 1 and sig[1][0][:1] == ["c"]:  # (type,): dynamic scalar
        return not isinstance(value, dict) or "tuple" not in value
    return _scalar_matches(value, sig)


def _scalar_matches(value: object, canonical: object) -> bool:
    """A manifest scalar against index._canonical's form of a value."""
    if not isinstance(canonical, list) or not canonical:
        return False
    tag = canonical[0]
    if isinstance(value, dict) and "float" in value:
        value = float(str(value["float"]))
    if isinstance(value, dict) and "tuple" in value:
        inner = canonical[1] if tag == "t" else None
        return (
            inner is not None
            and len(inner) == len(value["tuple"])
            and all(_scalar_matches(v, c) for v, c in zip(value["tuple"], inner))
        )
    if tag == "n":
        return value is None
    if tag == "b":
        return value is canonical[1]
    if tag == "i":
        return type(value) is int and str(value) == canonical[1]
    if tag == "s":
        return value == canonical[1]
    if tag in ("f", "y"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return struct.pack("<d", float(value)).hex() == canonical[1]
    if tag == "t" and isinstance(value, list):
        return len(value) == len(canonical[1]) and all(_scalar_matches(v, c) for v, c in zip(value, canonical[1]))
    return True  # a form this reader does not compare (a class, a dtype): not told apart


def _env_reasons(entry: _manifest.ManifestEntry, row: _Row) -> list[Reason]:
    """What the entry records of the environment that the row's trace had otherwise."""
    out = []
    env, stored = entry.field("env"), row.detail.get("env", {})
    for name in sorted(set(env) | {n for n, v in stored.items() if v}):
        want, have = env.get(name, ""), stored.get(name) or ""
        if want != have:
            out.append(Reason("env", f"env {name}: built with {have!r}, manifest {want!r}", name))
    environ = entry.field("environ")
    for name, have_read in row.reads:
        if name.startswith(_DERIVED) or name not in environ:
            continue
        if environ[name] != have_read:
            out.append(
                Reason("environ", f"os.environ[{name!r}]: built reading {have_read!r}, manifest {environ[name]!r}")
            )
    return out


_FILE_READS = ("=file:", "=listdir:", "=stat:")  # flydeps.observe.filereads' derived reads


def _file_reasons(row: _Row) -> list[Reason]:
    """The files and directory listings the row's trace read (its derived reads
    ``=file:PATH``, ``=listdir:PATH``, ``=stat:VIEW:PATH``) that read otherwise now."""
    from flydeps.observe import environ, filereads  # noqa: F401  (its import attaches the file evaluators)

    out = []
    for name, value in row.reads:
        if name.startswith(_FILE_READS):
            now = environ.current(name)
            if now != value:
                what = f"{environ.label(name)}: {environ.change(name, value, now)} since the build"
                out.append(Reason("file", what, name))
    return out


# --- static digests --------------------------------------------------------------------


def _module_files(entries: Sequence[_manifest.ManifestEntry], roots: Sequence[Path]) -> dict[str, Path]:
    """The source file of each entry's launcher module, found under ``roots``; a module found
    under none is a :class:`PlanError` naming the entry (judging its rows against a graph
    without its code would call every one of them present)."""
    files: dict[str, Path] = {}
    for entry in entries:
        module = entry.launcher.partition(":")[0]
        if module in files:
            continue
        parts = module.split(".")
        for root in roots:
            found = [
                c
                for c in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py"))
                if c.is_file()
            ]
            if found:
                files[module] = found[0]
                break
        else:
            shown = ", ".join(str(r) for r in roots)
            raise PlanError(
                f"{entry.where}: module {module} of {entry.launcher} is not under {shown}: "
                "give the source root its package is in (--root DIR)"
            )
    return files


# How a reason names a node by its kind (as ``flydeps aot list`` and strict mode do).
_WORDS = {"global": "global", "external": "library", "unresolved": "unresolved"}


def _comparable(graph: DepGraph, nid: str) -> bool:
    node = graph.nodes[nid]
    return "static-expression" not in node.tags and node.kind is not NodeKind.UNRESOLVED


def _node_reasons(row: _Row, now: DepGraph) -> list[Reason]:
    """The nodes of ``row`` whose static digest in the working tree is not the (runtime)
    digest stored in the row, where the two can be compared (:func:`_comparable`)."""
    out = []
    for nid, part in row.detail["nodes"].items():
        if not isinstance(part, list) or not part or not isinstance(part[0], str):
            continue
        node = now.nodes.get(nid)
        if node is None or not _comparable(now, nid) or node.digest == part[0]:
            continue
        where = str(node.location) if node.location else (part[1] if len(part) > 1 else "")
        kind = _WORDS.get(part[2], "helper") if len(part) > 2 else "helper"
        shown = f"{where} " if where else ""
        out.append(Reason(kind, f"{shown}{kind} {nid} changed since the build", nid, where))
    return _ordered(out)


def _ordered(reasons: list[Reason]) -> list[Reason]:
    # helpers (code) first, then what they read; each node once
    seen: dict[str, Reason] = {}
    for r in reasons:
        seen.setdefault(r.node or r.text, r)
    return sorted(seen.values(), key=lambda r: (r.kind != "helper", r.location, r.node))


@dataclass(frozen=True)
class _Sides:
    """The static analysis of the sources a row was built on (``old``: the build's source
    snapshot, or revision ``since``) and of the working tree (``new``), with each side's
    module source reader; ``rows``: the row keys ``old`` describes (None: every row)."""

    old: Analysis
    new: Analysis
    said: str  # "since the build" or "since REV"
    old_source: Callable[[str], bytes | None]
    new_source: Callable[[str], bytes | None]
    rows: frozenset[str] | None = None
    modules: frozenset[str] | None = None
    # ``old`` is the build's own source snapshot: a row it describes must agree with it
    # (:meth:`describes`); row key -> the first node that does not, for those that do not.
    snapshot: bool = False
    disagreeing: dict[str, str] = field(default_factory=dict)

    @functools.cached_property
    def writes(self) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
        """:func:`_environ_writes` of each side (once per plan)."""
        return _environ_writes(self.old), _environ_writes(self.new)

    @functools.cached_property
    def unmodeled(self) -> tuple[_Unmodeled, _Unmodeled]:
        """:func:`_unmodeled` of each side (once per plan)."""
        return _unmodeled(self.old), _unmodeled(self.new)

    @functools.cached_property
    def effects(self) -> tuple[list[tuple[str, frozenset[str], str, str]], list[tuple[str, frozenset[str], str, str]]]:
        """:func:`_effects` of each side (once per plan)."""
        return _effects(self.old), _effects(self.new)

    def describes(self, row: _Row, module: str) -> bool:
        """Whether ``old`` is the source ``row`` was built on: listed by the snapshot and, for
        the build's snapshot, agreeing with every digest the row stores that a static digest
        can be compared with (a snapshot edited by hand or copied from another build does
        not, and is not used for that row: it is judged by the digests it stores)."""
        if not self.describes_key(row.key, module):
            return False
        if not self.snapshot:
            return True
        if row.key not in self.disagreeing:
            self.disagreeing[row.key] = _disagreement(row, self.old.graph) or ""
        return not self.disagreeing[row.key]

    def describes_key(self, key: str, module: str) -> bool:
        return (self.rows is None or key in self.rows) and (self.modules is None or module in self.modules)


def _disagreement(row: _Row, graph: DepGraph) -> str | None:
    """The first node (sorted) whose digest in the row differs from its static digest in
    ``graph`` where the two can be compared (:func:`_comparable`), or None."""
    for nid in sorted(row.detail["nodes"]):
        part = row.detail["nodes"][nid]
        if not isinstance(part, list) or not part or not isinstance(part[0], str):
            continue
        node = graph.nodes.get(nid)
        if node is not None and _comparable(graph, nid) and node.digest != part[0]:
            return nid
    return None


def _diff_reasons(row: _Row, module: str, head: str, sides: _Sides, source: Path | None = None) -> list[Reason]:
    """What changed between the two sides under each node ``row`` lists (its transitive
    static digest: the expression a global is bound to, a rebinding under module-level
    control flow, a helper added below it), and in the module-level statements binding the
    name the entry is reached by (``head``: an instance, a builder's call) and the
    module-level names they read."""
    from flydeps.static.diff import _changed_nodes

    old, new = sides.old, sides.new
    out = []
    for nid, part in row.detail["nodes"].items():
        if not isinstance(part, list):
            continue
        before, after = old.digests.get(nid), new.digests.get(nid)
        if before == after:
            continue
        kind = _WORDS.get(part[2], "helper") if len(part) > 2 and isinstance(part[2], str) else "helper"
        if before is None or after is None:
            node = new.graph.nodes.get(nid) or old.graph.nodes.get(nid)
            where = str(node.location) if node is not None and node.location else ""
            what = "added" if before is None else "removed"
            out.append(Reason(kind, f"{where + ' ' if where else ''}{kind} {nid} {what} {sides.said}", nid, where))
            continue
        for changed, what in _changed_nodes(old.graph, new.graph, nid):
            node = new.graph.nodes.get(changed) or old.graph.nodes.get(changed)
            where = str(node.location) if node is not None and node.location else ""
            word = _WORDS.get(node.kind.value, "helper") if node is not None else "helper"
            out.append(
                Reason(word, f"{where + ' ' if where else ''}{word} {changed} {what} {sides.said}", changed, where)
            )
    read = {name for name, _value in row.reads if not name.startswith(_DERIVED)}
    before_writes, after_writes = sides.writes
    for name in sorted(read):
        was_w = (before_writes.get(name), before_writes.get("*"))
        now_w = (after_writes.get(name), after_writes.get("*"))
        if [w and w[0] for w in was_w] != [w and w[0] for w in now_w]:  # the statements, not their lines
            where = (now_w[0] or now_w[1] or was_w[0] or was_w[1] or ("", ""))[1]
            text = (
                f"{where + ' ' if where else ''}environ module-level write of os.environ[{name!r}] "
                f"(the build's trace read it) changed {sides.said}"
            )
            out.append(Reason("environ", text, f"os.environ[{name!r}]", where))
    mods = {nid.partition(":")[0] for nid in row.detail["nodes"] if ":" in nid} | {module}
    mods |= {m.rpartition(".")[0] for m in list(mods) if "." in m}  # a package's __init__ runs first
    for m in list(mods):
        while "." in m:
            mods.add(m := m.rpartition(".")[0])
    out += _unmodeled_reasons(mods, sides)
    old_effects, new_effects = (
        sorted((m, d, w) for m, touched, d, w in side if touched & mods) for side in sides.effects
    )
    if [(m, d) for m, d, _w in old_effects] != [(m, d) for m, d, _w in new_effects]:
        gone = [e for e in old_effects if (e[0], e[1]) not in {(m, d) for m, d, _w in new_effects}]
        came = [e for e in new_effects if (e[0], e[1]) not in {(m, d) for m, d, _w in old_effects}]
        first = (came or gone)[0]
        text = (
            f"{first[2]} module-level code of {first[0]} that acts on other objects (an attribute or item "
            f"set, a call) changed {sides.said}: what it does to a trace is not modeled"
        )
        out.append(Reason("global", text, f"{first[0]}#import-time", first[2]))
    if head:
        was, now = _binding(sides.old_source(module), head), _binding(sides.new_source(module), head)
        if (was and was[0]) != (now and now[0]):  # the statements, not where they are
            line = now[1] if now is not None else (was[1] if was is not None else 0)
            depth = module.count(".") + (2 if source is not None and source.name == "__init__.py" else 1)
            shown = "/".join(source.parts[-depth:]) if source is not None else module.replace(".", "/") + ".py"
            where = f"{shown}:{line}" if line else ""
            text = f"{where + ' ' if where else ''}{module}:{head} bound otherwise {sides.said}"
            out.append(Reason("global", text, f"{module}:{head}", where))
    return _ordered(out)


_WRITERS = frozenset({"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"})


def _os_names(tree: object) -> tuple[set[str], set[str]]:
    """The names a module binds to ``os`` (``import os as _os``) and to ``os.environ``
    (``from os import environ as env``), anywhere in it."""
    import ast

    modules, environs = {"os"}, {"environ"}
    for node in ast.walk(tree):  # type: ignore[arg-type]
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "os" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            environs |= {a.asname or a.name for a in node.names if a.name == "environ"}
    return modules, environs


def _written_names(stmt: object, os_names: tuple[set[str], set[str]] = ({"os"}, {"environ"})) -> set[str]:
    """The variables a module-level statement writes to ``os.environ`` (``*``: one it cannot
    name, an ``update``, a computed key, ``os.putenv``); ``os_names``: :func:`_os_names`."""
    import ast

    modules, environs = os_names

    def _environ_target(node: object) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "environ":
            return isinstance(node.value, ast.Name) and node.value.id in modules
        return isinstance(node, ast.Name) and node.id in environs

    names: set[str] = set()

    def key(expr: object) -> str:
        return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else "*"

    for node in ast.walk(stmt):  # type: ignore[arg-type]
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _environ_target(target.value):
                    names.add(key(target.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if _environ_target(func.value) and func.attr in _WRITERS:
                named = func.attr in ("setdefault", "pop", "__setitem__", "__delitem__") and node.args
                names.add(key(node.args[0]) if named else "*")
            elif func.attr in ("putenv", "unsetenv") and isinstance(func.value, ast.Name) and func.value.id in modules:
                names.add(key(node.args[0]) if node.args else "*")
    return names


def _import_time_writes(tree: Any) -> list[tuple[str, Any]]:
    """``(variable or *, statement)`` of each statement of a parsed module that writes
    ``os.environ`` when the module is imported: module-level statements (in any ``if``/
    ``try``/``with``/loop there) and class bodies; not function bodies (they run when called)."""
    import ast

    aliases = _os_names(tree)
    out = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(stmt, ast.ClassDef):  # a class body runs on import, its methods do not
            todo[:0] = stmt.body
            continue
        out += [(name, stmt) for name in sorted(_written_names(stmt, aliases))]
    return out


@dataclass(frozen=True)
class _Unmodeled:
    """A side's modules: those its graph holds nodes of, the import edges among the project
    modules they may import, and each one's code digest (docstrings, comments and layout
    aside) with its path."""

    modeled: frozenset[str]
    edges: Mapping[str, frozenset[str]]
    digests: Mapping[str, tuple[str, str]]


def _unmodeled(analysis: Analysis) -> _Unmodeled:
    import ast

    from blake3 import blake3

    from .sources import import_edges

    digests = {}
    for located in _graph_modules(analysis):
        try:
            tree = ast.parse(analysis.project.tree.read(located.path))
        except (OSError, SyntaxError, ValueError):
            continue
        code = ast.dump(_without_docstrings(tree))
        digests[located.name] = (blake3(code.encode()).hexdigest(), located.location_path or located.path)
    modeled = frozenset(n.module for n in analysis.graph.nodes.values() if n.module)
    return _Unmodeled(modeled, import_edges(analysis), digests)


def _unmodeled_reasons(mods: set[str], sides: _Sides) -> list[Reason]:
    """A project module that ``mods`` may import (directly or through other such modules) and
    of which the static graph holds no node (what is read from it is not followed: an
    ``import_module("m").X``, ``sys.modules["m"].X`` in a helper), whose code changed."""
    old, new = sides.unmodeled
    modeled = old.modeled | new.modeled
    reach: set[str] = set()
    todo = list(mods)
    while todo:
        name = todo.pop()
        for target in old.edges.get(name, frozenset()) | new.edges.get(name, frozenset()):
            if target not in modeled and target not in reach:
                reach.add(target)
                todo.append(target)
    out = []
    for name in sorted(reach):
        was, now = old.digests.get(name), new.digests.get(name)
        if (was and was[0]) != (now and now[0]):
            where = (now or was or ("", ""))[1]
            text = (
                f"{where} module {name} changed {sides.said}: a module the row's code may import, "
                "whose reads the static graph does not follow"
            )
            out.append(Reason("global", text, name, where))
    return out


def _graph_modules(analysis: Analysis) -> list[Any]:
    """:func:`.sources.module_closure`: the modules whose import-time code is scanned."""
    from .sources import module_closure

    return module_closure(analysis)


def _effects(analysis: Analysis) -> list[tuple[str, frozenset[str], str, str]]:
    """``(module, modules it may act on, statement dump, file:line)`` of each import-time
    effect (:func:`_import_time_effects`) in the modules of ``analysis``' graph."""
    import ast

    out = []
    for located in _graph_modules(analysis):
        try:
            tree = ast.parse(analysis.project.tree.read(located.path))
        except (OSError, SyntaxError, ValueError):
            continue
        shown = located.location_path or located.path
        for touched, stmt in _import_time_effects(tree, located.name, located.is_package):
            out.append((located.name, touched, ast.dump(stmt), f"{shown}:{stmt.lineno}"))
    return out


def _environ_writes(analysis: Analysis) -> dict[str, tuple[str, str]]:
    """Variable (or ``*``) -> (digest, ``file:line`` of the first) of the module-level
    statements that write ``os.environ`` in the modules of ``analysis``' graph and their
    packages: what importing them does to the environment a trace then reads."""
    import ast

    from blake3 import blake3

    found: dict[str, list[tuple[str, str]]] = {}
    for located in _graph_modules(analysis):
        module = located.name
        try:
            tree = ast.parse(analysis.project.tree.read(located.path))
        except (OSError, SyntaxError, ValueError):
            continue
        shown = located.location_path or located.path
        for name, stmt in _import_time_writes(tree):
            found.setdefault(name, []).append((f"{module}:{ast.dump(stmt)}", f"{shown}:{stmt.lineno}"))
    out = {
        name: (blake3("\n".join(d for d, _w in entries).encode()).hexdigest(), entries[0][1])
        for name, entries in found.items()
    }
    return out


def _without_docstrings(node: Any) -> Any:
    """A copy of ``node`` whose function and class bodies have no docstring."""
    import ast
    import copy

    node = copy.deepcopy(node)
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                inner.body = body[1:] or [ast.Pass()]
    return node


def _imported_modules(tree: Any, module: str, is_package: bool) -> dict[str, str]:
    """Module-level name -> the module an import binds it to (``from . import m``: ``pkg.m``)."""
    import ast

    from .sources import imported_base

    package = module if is_package else module.rpartition(".")[0]
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = imported_base(package, node.level, node.module)
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{base}.{a.name}" if node.module is None or node.level else base
    return out


def _import_time_effects(tree: Any, module: str, is_package: bool) -> list[tuple[frozenset[str], Any]]:
    """``(modules it may act on, statement)`` of each statement a module runs on import that acts
    on other objects (an attribute or item set or deleted, an expression statement: a call):
    what binds no name the static graph follows. Writes of ``os.environ`` alone are left to
    :func:`_import_time_writes` (judged per variable a trace read). The modules: this one and
    those its imports bind the names the statement reads (``memops.PAD = 8``: ``...memops``)."""
    import ast

    imported = _imported_modules(tree, module, is_package)
    aliases = _os_names(tree)
    out = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.ClassDef):
            todo[:0] = stmt.body
            continue
        if isinstance(stmt, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Try)) or type(
            stmt
        ).__name__ in ("TryStar", "Match"):
            nested = [getattr(stmt, f, []) or [] for f in ("body", "orelse", "finalbody")]
            nested += [h.body for h in getattr(stmt, "handlers", []) or []]
            nested += [c.body for c in getattr(stmt, "cases", []) or []]
            todo[:0] = [s for block in nested for s in block]
            continue
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                continue  # a docstring, a bare literal
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = stmt.targets if isinstance(stmt, (ast.Assign, ast.Delete)) else [stmt.target]
            if all(isinstance(t, ast.Name) for t in targets) or all(
                isinstance(t, (ast.Name, ast.Tuple, ast.List, ast.Starred))
                and all(
                    isinstance(n, ast.Name)
                    for n in ast.walk(t)
                    if isinstance(n, ast.expr) and not isinstance(n, (ast.Tuple, ast.List, ast.Starred))
                )
                for t in targets
            ):
                continue  # binds names: the graph follows them
        else:
            continue
        if (
            _written_names(stmt, aliases)
            and isinstance(stmt, ast.Expr) is False
            and all(isinstance(t, ast.Subscript) for t in getattr(stmt, "targets", [getattr(stmt, "target", None)]))
        ):
            continue  # os.environ[...] = ...: per variable
        if isinstance(stmt, ast.Expr) and _written_names(stmt, aliases):
            func = stmt.value.func if isinstance(stmt.value, ast.Call) else None
            if isinstance(func, ast.Attribute) and (func.attr in _WRITERS or func.attr in ("putenv", "unsetenv")):
                continue  # os.environ.setdefault(...), os.putenv(...): per variable
        touched = {module} | {imported[n.id] for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id in imported}
        out.append((frozenset(touched), stmt))
    return out


def _binding(source: bytes | None, name: str) -> tuple[str, int] | None:
    """``(digest of the module-level statements binding name, the first one's line)``, with the
    conditions around them (``if``/``match``/loops/``except``), following the module-level names
    those statements and conditions read; a ``def``/``class`` counts by its code without
    docstrings (a class's ``__init__`` makes the instance an entry is reached by), a class
    with the module-level names it reads (its bases, a global its ``__init__`` reads). None
    when the source is missing or does not parse."""
    import ast

    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    # name -> [(the conditions around the statement, the statement)]
    binders: dict[str, list[tuple[tuple[ast.AST, ...], ast.stmt]]] = {}

    def bound(stmt: ast.stmt) -> set[str]:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return {stmt.name}
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return {(a.asname or a.name).partition(".")[0] for a in stmt.names}
        found = set()
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.add(node.id)
        return found

    def visit(body: list[ast.stmt], around: tuple[ast.AST, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.While)):
                for part in (stmt.body, stmt.orelse):
                    visit(part, (*around, stmt.test))
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                for part in (stmt.body, stmt.orelse):
                    visit(part, (*around, stmt.target, stmt.iter))
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                visit(stmt.body, (*around, *stmt.items))
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                for field_name in ("body", "orelse", "finalbody"):
                    visit(getattr(stmt, field_name, []) or [], around)
                for handler in getattr(stmt, "handlers", []) or []:
                    visit(handler.body, (*around, handler))
            elif type(stmt).__name__ == "Match":  # Python 3.10+
                for case in stmt.cases:  # type: ignore[attr-defined]
                    visit(case.body, (*around, stmt.subject, case.pattern, *([case.guard] if case.guard else [])))  # type: ignore[attr-defined]
            else:
                for n in bound(stmt):
                    binders.setdefault(n, []).append((around, stmt))

    visit(tree.body, ())
    if name not in binders:
        return None
    todo, done, first = [name], set(), 0
    parts: list[str] = []

    def reads(node: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]

    while todo:
        current = todo.pop()
        if current in done or current not in binders:
            continue
        done.add(current)
        for around, stmt in binders[current]:
            if current == name:  # where the name itself is bound
                first = stmt.lineno if not first else min(first, stmt.lineno)
            parts += [f"when {ast.dump(c)}" for c in around]
            for condition in around:
                todo += reads(condition)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # its code (a builder's body: what the graph of the row may not hold); what it
                # reads are nodes of the graph (its closures', its callees')
                parts.append(ast.dump(_without_docstrings(stmt)))
                continue
            if isinstance(stmt, ast.ClassDef):
                # its code (its __init__), and the module-level names it reads (its bases, a
                # global its __init__ reads); a local name that shadows one is followed too
                parts.append(ast.dump(_without_docstrings(stmt)))
            else:
                parts.append(ast.dump(stmt))
            todo += reads(stmt)
    from blake3 import blake3

    return blake3("\n".join(parts).encode()).hexdigest(), first


def _static_now(files: Sequence[Path], roots: Sequence[Path]) -> Analysis:
    from flydeps.static import analyze

    return analyze([str(f) for f in files], roots=[str(r) for r in roots])


def _snapshot_sides(directory: Path, now: Analysis, sources: Mapping[str, Path]) -> tuple[_Sides | None, str | None]:
    """The build's source snapshot against the working tree (``now``), or None and why not."""
    from flydeps.static import analyze

    from . import sources as _sources

    try:
        snap = _sources.load(directory)
    except _sources.SnapshotError as error:
        return None, f"{error}: nodes the static analysis values as expressions are not judged"
    if snap is None:
        return None, (
            f"{directory} has no source snapshot ({_sources.SOURCES_NAME}, written by `flydeps aot build` since "
            "this version): a global bound to an expression or rebound under module-level control flow is not "
            "judged; run the build again (what it serves is not rebuilt), or plan with --since REV"
        )
    old = analyze(list(snap.targets), roots=list(snap.roots), tree=snap.tree(), use_cache=False)
    by_module = {m: snap.read(t) for m, t in _snapshot_files(snap).items()}

    def new_source(module: str) -> bytes | None:
        path = sources.get(module)
        try:
            return path.read_bytes() if path is not None else None
        except OSError:
            return None

    return _Sides(old, now, "since the build", by_module.get, new_source, snap.rows, snap.modules, snapshot=True), None


def _snapshot_files(snap: Any) -> dict[str, str]:
    """module name -> the snapshot's path of its file (its targets)."""
    out = {}
    for target in snap.targets:
        for root in snap.roots:
            rel = os.path.relpath(target, root)
            if rel.startswith(".."):
                continue
            parts = rel[: -len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = target
    return out


def _static_since(files: Sequence[Path], roots: Sequence[Path], since: str) -> _Sides:
    """Revision ``since`` against the working tree's tracked files."""
    from flydeps.static.analyze import analyze
    from flydeps.static.diff import GitError, GitTree, TrackedTree, repo_root

    where = str(roots[0] if roots else Path.cwd())
    try:
        repo = repo_root(where)
        old_tree = GitTree(repo, since)
        new_tree = TrackedTree(repo)
    except GitError as error:
        raise PlanError(f"--since {since}: {error}") from None

    def rel(p: Path) -> str:
        return os.path.relpath(p.resolve(), repo)

    paths, rels = [rel(f) for f in files], [rel(r) for r in roots]
    old = analyze(paths, roots=rels, tree=old_tree)
    new = analyze(paths, roots=rels, tree=new_tree)
    by_module = {}
    for f in files:
        for r in roots:
            relative = os.path.relpath(f.resolve(), r.resolve())
            if not relative.startswith(".."):
                parts = relative[: -len(".py")].split(os.sep)
                by_module[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = rel(f)
                break

    def reader(tree: Any) -> Callable[[str], bytes | None]:
        def read(module: str) -> bytes | None:
            path = by_module.get(module)
            try:
                return tree.read(path) if path is not None else None
            except (OSError, KeyError):
                return None

        return read

    return _Sides(old, new, f"since {since}", reader(old_tree), reader(new_tree))


# --- the plan ----------------------------------------------------------------------------


def plan(
    manifest: Path,
    directory: Path,
    *,
    arches: Sequence[str] = (),
    roots: Sequence[Path] = (),
    since: str | None = None,
) -> Plan:
    """The plan of ``manifest`` against ``directory`` (module docstring). Raises
    :class:`PlanError` naming the file[:line] or argument on bad input."""
    try:
        entries = _manifest.read(manifest)
    except _manifest.ManifestError as error:
        raise PlanError(str(error)) from None
    rows = _rows(directory)
    asked = tuple(dict.fromkeys(a for a in arches if a)) or tuple(sorted({r.arch for r in rows}))
    if not asked:
        raise PlanError(f"{directory}: its index holds no specialization: give the arches to plan for (--arch)")
    held = {r.arch for r in rows}
    named = [e for e in entries if e.unnamed is None]
    unnamed = tuple(f"{e.where}: {e.launcher}: {e.unnamed}" for e in entries if e.unnamed is not None)
    roots = [Path(r) for r in roots] or [Path.cwd()]
    sources = _module_files(named, roots)
    files = list(sources.values())
    sides: _Sides | None
    if since is None:
        now = _static_now(files, roots)
        sides, why_not = _snapshot_sides(directory, now, sources)
        notes = [why_not] if why_not is not None else []
    else:
        sides = _static_since(files, roots, since)
        now, notes = sides.new, []
    analyses = (now,) if sides is None else (sides.old, sides.new)
    diagnostics = sorted({f"{d.path}:{d.line}: {d.message}" for a in analyses for d in a.diagnostics})
    unseen = [(a.graph, found) for a in {id(a): a for a in analyses}.values() if (found := outside_imports(a))]
    units = []
    for entry in named:
        for arch in asked:
            source = sources.get(entry.launcher.partition(":")[0])
            units.append(_judge(entry, arch, rows, now.graph, sides, since, source, unseen))
    if since is None and sides is not None:
        other = sorted(
            {u.row_key for u in units if u.row_key and not sides.describes_key(u.row_key, u.launcher.partition(":")[0])}
        )
        if other:
            notes.append(
                f"{len(other)} row(s) of {directory} were not built or served by the build that left its source "
                "snapshot: judged by the digests they store only; build again, or plan with --since REV"
            )
        odd = sorted((key, nid) for key, nid in sides.disagreeing.items() if nid)
        if odd:
            notes.append(
                f"the source snapshot of {directory} does not hold the sources {len(odd)} row(s) were built on "
                f"(row {odd[0][0][:16]}: {odd[0][1]} has another digest in it than the row stores; edited by hand "
                "or copied from another build): those rows are judged by the digests they store only; build again"
            )
    return Plan(
        str(directory),
        str(manifest),
        since,
        asked,
        tuple(a for a in asked if a not in held),
        tuple(units),
        unnamed,
        tuple(diagnostics),
        tuple(notes),
    )


def _judge(
    entry: _manifest.ManifestEntry,
    arch: str,
    rows: Sequence[_Row],
    graph: DepGraph,
    sides: _Sides | None,
    since: str | None,
    source: Path | None = None,
    unseen: Sequence[tuple[DepGraph, Mapping[str, str]]] = (),
) -> Unit:
    found = _candidates(entry, arch, rows, source)
    if not found:
        return Unit(entry.launcher, entry.where, arch, "missing")
    module, _, qual = entry.launcher.partition(":")
    head = qual.partition(".")[0]
    judged = []
    for row in found:
        env = _env_reasons(entry, row)
        nodes = _node_reasons(row, graph) + _file_reasons(row) if since is None else []
        if sides is not None and sides.describes(row, module):
            nodes = _ordered(nodes + _diff_reasons(row, module, head, sides, source))
        judged.append((bool(env), len(nodes), row, nodes + env))
    # a row with the entry's environment first, then the fewest changed nodes
    _, _, row, reasons = min(judged, key=lambda j: (j[0], j[1], j[2].key))
    status = "invalidated" if reasons else "present"
    unchecked: tuple[str, ...] = ()
    if status == "present" and since is None and (sides is None or not sides.describes(row, module)):
        unchecked = tuple(sorted(n for n in row.detail["nodes"] if n in graph.nodes and not _comparable(graph, n)))
    if status == "present" and not unchecked:
        outside = _outside_reads(row, unseen)
        if outside:
            why = (
                "its code imports modules outside the project that are not installed, which no digest covers "
                "(give their directory as --root; a library: FLYDEPS_ASSUME_INSTALLED=NAME)"
            )
            return Unit(entry.launcher, entry.where, arch, status, row.launcher, row.key, (), outside, why)
    return Unit(entry.launcher, entry.where, arch, status, row.launcher, row.key, tuple(reasons), unchecked)


def _outside_reads(row: _Row, unseen: Sequence[tuple[DepGraph, Mapping[str, str]]]) -> tuple[str, ...]:
    """The modules outside the project (:func:`flydeps.static.analyze.outside_imports`) whose
    names the code of ``row``'s nodes reaches, on either side, as ``name (file:line)``: an
    edit there changes what the row's trace reads, and neither the static digests nor the
    snapshot hold their code (a directory a module puts on ``sys.path``, a ``PYTHONPATH`` entry)."""
    out: dict[str, str] = {}
    for graph, outside in unseen:
        edges = graph.out_edges()
        todo = [n for n in row.detail["nodes"] if n in graph.nodes]
        seen = set(todo)
        while todo:
            nid = todo.pop()
            node = graph.nodes[nid]
            if node.kind is NodeKind.UNRESOLVED:
                name = node.detail.partition(" is neither a module of the project")
                if name[1] and name[0] in outside:
                    out.setdefault(name[0], f"{name[0]} ({outside[name[0]]})")
                continue
            for e in edges.get(nid, ()):
                if e.dst not in seen:
                    seen.add(e.dst)
                    todo.append(e.dst)
    return tuple(out[k] for k in sorted(out))


# --- output and the CLI --------------------------------------------------------------------


def render_text(result: Plan) -> str:
    present, stale, missing = (result.count(s) for s in ("present", "invalidated", "missing"))
    since = f" since {result.since}" if result.since else ""
    unjudged = result.unchecked()
    head = (
        f"aot plan for {result.directory}{since}: {present} present"
        f"{f' ({unjudged} of them unchecked)' if unjudged else ''}, {stale} invalidated, "
        f"{missing} missing (of {len(result.units)})"
    )
    lines = [head]
    if result.absent_arches:
        lines.append(f"arches with no specialization in {result.directory}: {', '.join(result.absent_arches)}")
    lines += [u.line() for u in result.units if u.status != "present" or u.unchecked]
    lines += [f"not buildable (no cross-process name): {line}" for line in result.unnamed]
    lines += [f"note: {line}" for line in result.notes]
    return "\n".join(lines) + "\n"


def render_json(result: Plan) -> str:
    doc = {
        "schema": JSON_SCHEMA,
        "dir": result.directory,
        "manifest": result.manifest,
        "since": result.since,
        "arches": list(result.arches),
        "absent_arches": list(result.absent_arches),
        "counts": {
            **{s: result.count(s) for s in ("present", "invalidated", "missing")},
            "unchecked": result.unchecked(),
        },
        "units": [
            {
                "launcher": u.launcher,
                "where": u.where,
                "arch": u.arch,
                "status": u.status,
                "row_launcher": u.row_launcher or None,
                "row_key": u.row_key or None,
                "reasons": [
                    {"kind": r.kind, "node": r.node, "location": r.location, "text": r.text} for r in u.reasons
                ],
                "unchecked": list(u.unchecked),
                **({"unchecked_why": u.unchecked_why} if u.unchecked else {}),
            }
            for u in result.units
        ],
        "unnamed": list(result.unnamed),
        "diagnostics": list(result.diagnostics),
        "notes": list(result.notes),
    }
    return json.dumps(doc, indent=2) + "\n"


def run(args: argparse.Namespace) -> int:
    """``flydeps aot plan``: the plan on stdout; 2 and one line on stderr on bad input."""
    arches = [a.strip() for a in (args.arch or "").split(",") if a.strip()]
    try:
        result = plan(
            Path(args.manifest), Path(args.out), arches=arches, roots=[Path(r) for r in args.root], since=args.since
        )
    except PlanError as error:
        sys.stderr.write(f"flydeps aot plan: {error}\n")
        return EXIT_BAD_INPUT
    sys.stdout.write(render_json(result) if args.format == "json" else render_text(result))
    return EXIT_REBUILD if args.exit_code and result.rebuild else EXIT_OK
