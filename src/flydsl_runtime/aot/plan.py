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
* ``invalidated``: a row is that specialization but (a) a node of the dependency graph its
  ``detail`` lists has another static digest in the working tree than the digest stored
  in the row (without ``since``), or changed between ``since`` and the working tree (with
  it): each such node is named (helper, ``module:qualname``, ``file:line``); or (b) without
  ``since``, a file or directory listing the trace read (the row's derived reads
  ``=file:``/``=listdir:``/``=stat:``, a tuning table) reads otherwise now (a relative path
  re-read from the current directory, as a runtime would); or (c) no row of it has the
  code-generation variables or ``os.environ`` reads the entry records (each difference
  named);
* ``missing``: no row of ``DIR`` is that specialization (to build).

The static digests come from :func:`flydeps.static.analyze` over the launchers' module
files (the working tree as it is on disk; with ``since``, the files git tracks, compared
with the revision through :mod:`flydeps.static.diff`'s trees), whose node digests are the
runtime's own (the static front-end's contract). A node the static graph does not have
(a runtime-only node: a wrapper object, a closure cell's value) or whose static digest is
not comparable (``static-expression``: an expression, not its value) is not judged; a
changed helper always changes the digest of the function that calls it, which is.

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
import json
import logging
import os
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flydeps.errors import FlydepsError
from flydeps.graph import DepGraph, NodeKind

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

    def line(self) -> str:
        head = f"{self.status:11} {self.launcher} [{self.arch}] ({self.where})"
        if self.status == "missing":
            return f"{head}: no specialization in DIR"
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

    def count(self, status: str) -> int:
        return sum(u.status == status for u in self.units)

    @property
    def rebuild(self) -> bool:
        return any(u.status != "present" for u in self.units)


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


def _node_reasons(row: _Row, now: DepGraph, changed: Mapping[str, str] | None, since: str | None) -> list[Reason]:
    """The nodes of ``row`` that changed: against the working tree's digests (``changed``
    None), or among ``changed`` (node id -> what, between ``since`` and the working tree)."""
    out = []
    for nid, part in row.detail["nodes"].items():
        if not isinstance(part, list) or not part or not isinstance(part[0], str):
            continue
        node = now.nodes.get(nid)
        where = str(node.location) if node is not None and node.location else (part[1] if len(part) > 1 else "")
        kind = _WORDS.get(part[2], "helper") if len(part) > 2 else "helper"
        if changed is None:
            if node is None or not _comparable(now, nid) or node.digest == part[0]:
                continue
            what = "changed since the build"
        else:
            if nid not in changed:
                continue
            what = f"{changed[nid]} since {since}"
        shown = f"{where} " if where else ""
        out.append(Reason(kind, f"{shown}{kind} {nid} {what}", nid, where))
    # helpers (code) first, then what they read
    return sorted(out, key=lambda r: (r.kind != "helper", r.location, r.node))


def _static_now(files: Sequence[Path], roots: Sequence[Path]) -> tuple[DepGraph, list[str]]:
    from flydeps.static import analyze

    analysis = analyze([str(f) for f in files], roots=[str(r) for r in roots])
    return analysis.graph, [f"{d.path}:{d.line}: {d.message}" for d in analysis.diagnostics]


def _static_since(
    files: Sequence[Path], roots: Sequence[Path], since: str
) -> tuple[DepGraph, dict[str, str], list[str]]:
    """The working tree's graph and the nodes that changed since ``since`` (id -> what)."""
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
    changed: dict[str, str] = {}
    for nid, node in new.graph.nodes.items():
        before = old.graph.nodes.get(nid)
        if before is None:
            changed[nid] = "added"
        elif before.digest != node.digest and _comparable(new.graph, nid):
            changed[nid] = "changed"
    for nid in old.graph.nodes:
        if nid not in new.graph.nodes:
            changed[nid] = "removed"
    diagnostics = sorted({f"{d.path}:{d.line}: {d.message}" for d in (*old.diagnostics, *new.diagnostics)})
    return new.graph, changed, diagnostics


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
    changed: dict[str, str] | None = None
    if since is None:
        graph, diagnostics = _static_now(files, roots)
    else:
        graph, changed, diagnostics = _static_since(files, roots, since)
    units = []
    for entry in named:
        for arch in asked:
            source = sources.get(entry.launcher.partition(":")[0])
            units.append(_judge(entry, arch, rows, graph, changed, since, source))
    return Plan(
        str(directory),
        str(manifest),
        since,
        asked,
        tuple(a for a in asked if a not in held),
        tuple(units),
        unnamed,
        tuple(diagnostics),
    )


def _judge(
    entry: _manifest.ManifestEntry,
    arch: str,
    rows: Sequence[_Row],
    graph: DepGraph,
    changed: Mapping[str, str] | None,
    since: str | None,
    source: Path | None = None,
) -> Unit:
    found = _candidates(entry, arch, rows, source)
    if not found:
        return Unit(entry.launcher, entry.where, arch, "missing")
    judged = []
    for row in found:
        env = _env_reasons(entry, row)
        nodes = _node_reasons(row, graph, changed, since) + (_file_reasons(row) if changed is None else [])
        judged.append((bool(env), len(nodes), row, nodes + env))
    # a row with the entry's environment first, then the fewest changed nodes
    _, _, row, reasons = min(judged, key=lambda j: (j[0], j[1], j[2].key))
    status = "invalidated" if reasons else "present"
    return Unit(entry.launcher, entry.where, arch, status, row.launcher, row.key, tuple(reasons))


# --- output and the CLI --------------------------------------------------------------------


def render_text(result: Plan) -> str:
    present, stale, missing = (result.count(s) for s in ("present", "invalidated", "missing"))
    since = f" since {result.since}" if result.since else ""
    head = (
        f"aot plan for {result.directory}{since}: {present} present, {stale} invalidated, "
        f"{missing} missing (of {len(result.units)})"
    )
    lines = [head]
    if result.absent_arches:
        lines.append(f"arches with no specialization in {result.directory}: {', '.join(result.absent_arches)}")
    lines += [u.line() for u in result.units if u.status != "present"]
    lines += [f"not buildable (no cross-process name): {line}" for line in result.unnamed]
    return "\n".join(lines) + "\n"


def render_json(result: Plan) -> str:
    doc = {
        "schema": JSON_SCHEMA,
        "dir": result.directory,
        "manifest": result.manifest,
        "since": result.since,
        "arches": list(result.arches),
        "absent_arches": list(result.absent_arches),
        "counts": {s: result.count(s) for s in ("present", "invalidated", "missing")},
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
            }
            for u in result.units
        ],
        "unnamed": list(result.unnamed),
        "diagnostics": list(result.diagnostics),
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
