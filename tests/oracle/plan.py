"""The mutation plan: every generator applied to every subject, and the fast subset.

Contract
--------
:func:`build_plan` pairs each subject (:mod:`subjects`) with the mutations of the modules its
trace can reach: the source edits of :mod:`sites` (edit + reload), a reload without edit,
the live mutations of :mod:`live`, the environment variables the package reads while
tracing (found in its source) plus FlyDSL's code-gen and target selectors and one unrelated
variable, the ``fx.Constexpr[float]`` argument changes (``0.0 -> -0.0``, ``NaN -> NaN``, the
a few float32 steps up, ``int -> float``), an explicit ``stream`` where callers omit it, a trace of
another managed launcher sharing the helpers, cosmetic edits under
``FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1``, and edits of the data files its helpers read while
tracing (:func:`_data`: a value, a reformat, the same bytes again, a removal, a new table in
the listed directory). The control subject gets only the semantic changes
of the helper its kernel reaches through a computed ``getattr`` (kinds ``control: ...``).
The order is deterministic; :func:`fast_subset` picks a stratified sample
(every kind represented, each subject with each kind of neutral mutation) for CI.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from live import live_mutations, python_function, resolve
from model import Mutation, mutation_to_json, neutral_group
from sites import source_sites
from subjects import CONTROL, CONTROL_HELPER, SUBJECTS, Subject

# FlyDSL's own variables: code generation, debug info, the target selector (ARCH stays gfx942).
FLYDSL_ENV = (
    ("FLYDSL_COMPILE_OPT_LEVEL", "1"),
    ("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", "1"),
    ("FLYDSL_GPU_ARCH", "gfx950"),
    ("RW_ORACLE_UNRELATED", "1"),
)


def env_reads(text: str) -> list[tuple[str, str]]:
    """``(name, default)`` of every ``os.environ.get`` / ``os.getenv`` with a literal name."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if func in ("os.environ.get", "os.getenv"):
                default = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else ""
                found.append((cast(str, node.args[0].value), str(default)))
    return found


def _edits(subject: Subject, short: str, text: str, names: set[str]) -> list[Mutation]:
    out = []
    for site in source_sites(text, names):
        where = f"{short}.py:{site.line}"
        payload = (site.start, site.end, site.old, site.new)
        out.append(Mutation(site.kind, subject.name, short, "edit", where, site.detail, payload))
    out.append(Mutation("reload: no edit", subject.name, short, "reload", f"{short}.py", "importlib.reload"))
    debug = (("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", "1"),)
    for site in source_sites(text, names):
        if site.kind == "cosmetic: blank line":  # the first blank line of the module's first function
            where = f"{short}.py:{site.line}"
            payload = (site.start, site.end, site.old, site.new)
            out.append(
                Mutation("debug info: blank line", subject.name, short, "edit", where, site.detail, payload, debug)
            )
            break
    return out


def _env(subject: Subject, texts: dict[str, str]) -> list[Mutation]:
    reads = sorted({r for short in subject.reaches for r in env_reads(texts[short])})
    out = []
    for name, default in reads:
        value = {"0": "1", "1": "0"}.get(default, default + "_x")
        out.append(
            Mutation(
                "env var (read while tracing)",
                subject.name,
                "",
                "env",
                name,
                f"{default!r} -> {value!r}",
                (name, value),
            )
        )
    for name, value in FLYDSL_ENV:
        kind = "env var (unrelated)" if name.startswith("RW_ORACLE") else "env var (FlyDSL)"
        out.append(Mutation(kind, subject.name, "", "env", name, f"-> {value!r}", (name, value)))
    return out


def _arg(kind: str, subject: Subject, param: str, detail: str, new: tuple, base: object = None) -> Mutation:
    base_args = () if base is None else ((param, ("value", base)),)
    return Mutation(kind, subject.name, "", "args", param, detail, (param, new), (), base_args)


def _args(subject: Subject) -> list[Mutation]:
    out = []
    for param, value in subject.float_params:
        step = value * (1 + 2**-20) if value else 2.0**-100  # a different float32 value
        variants = (
            (0.0, -0.0, "0.0 -> -0.0"),
            (math.nan, math.nan, "NaN -> another NaN"),
            (value, step, f"{value!r} -> a few float32 steps up"),
            (1, 1.0, "int 1 -> float 1.0"),
        )
        out += [_arg("constexpr float argument", subject, param, d, ("value", new), base) for base, new, d in variants]
    if subject.module == "norms":
        out.append(_arg("call form", subject, "stream", "defaulted stream passed explicitly", ("stream",)))
    if subject.width_param:
        out.append(_arg("constexpr int argument", subject, subject.width_param, "4 -> 8", ("value", 8)))
    return out


def _leaves(value: object, path: tuple = ()) -> Iterator[tuple[tuple, int | float]]:
    """``(path, number)`` of every numeric leaf of a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def _with(document: object, path: tuple, value: object) -> object:
    """A copy of ``document`` with the leaf at ``path`` replaced."""
    if not path:
        return value
    copy = dict(document) if isinstance(document, dict) else list(document)  # type: ignore[call-overload]
    copy[path[0]] = _with(copy[path[0]], path[1:], value)
    return copy


def _json_text(document: object) -> str:
    return json.dumps(document, indent=2) + "\n"


def _data(subject: Subject, root: Path) -> list[Mutation]:
    """Edits of the data files the subject's helpers may read while tracing (every JSON file
    of its ``data`` directories): each numeric value, the file reformatted with the same
    values, rewritten with the same bytes, removed; and a table added to the directory.
    The files are written as :func:`_json_text` writes them, so a value edit changes
    nothing else."""
    out = []
    for directory in subject.data:
        files = sorted((root / directory).glob("*.json"))
        for file in files:
            rel, text = f"{directory}/{file.name}", file.read_text()
            document = json.loads(text)
            if _json_text(document) != text:
                raise ValueError(
                    f"{file}: write it as json.dumps(..., indent=2) plus a newline (value edits rewrite it so)"
                )
            for path, value in _leaves(document):
                new = value + 1 if isinstance(value, int) else (value * 2 if value else 1.0)
                where = f"{rel}:{'/'.join(map(str, path))}"
                text_new = _json_text(_with(document, path, new))
                out.append(
                    Mutation(
                        "data file: value edited",
                        subject.name,
                        "",
                        "data",
                        where,
                        f"{value!r} -> {new!r}",
                        (rel, text_new),
                    )
                )
            compact = json.dumps(document, separators=(",", ":"))
            out.append(
                Mutation(
                    "data file: reformatted, same values", subject.name, "", "data", rel, "compact JSON", (rel, compact)
                )
            )
            out.append(
                Mutation(
                    "cosmetic: data file rewritten with the same bytes",
                    subject.name,
                    "",
                    "data",
                    rel,
                    "same bytes, new mtime",
                    (rel, text),
                )
            )
            out.append(Mutation("data file: removed", subject.name, "", "data", rel, "deleted", (rel, None)))
        if files:
            added = f"{directory}/oracle_added.json"
            out.append(
                Mutation(
                    "data file: a table added to the directory",
                    subject.name,
                    "",
                    "data",
                    added,
                    f"a copy of {files[0].name}",
                    (added, files[0].read_text()),
                )
            )
    return out


def _others(subject: Subject) -> list[Mutation]:
    if "memops" not in subject.reaches:
        return []
    other = "layernorm" if subject.name == "rmsnorm" else "rmsnorm"
    return [
        Mutation(
            "shared write (other launcher)", subject.name, "", "other", other, "traces first (width 8)", (other, 8)
        )
    ]


def _editable(pkg: object, short: str, entry: tuple) -> bool:
    """Monkeypatch / ``__code__`` variants need a literal or an operator to change."""
    _kind, op, _where, _detail, payload = entry
    if op == "patch" and payload[1] == "edit":
        fn = python_function(getattr(pkg.module(short), payload[0]))  # type: ignore[attr-defined]
    elif op == "code":
        fn = resolve(pkg.module(short), payload[0])  # type: ignore[attr-defined]
    else:
        return True
    try:
        pkg.first_edit(fn)  # type: ignore[attr-defined]
    except LookupError:
        return False
    return True


def build_plan(pkg: object) -> list[Mutation]:
    """Every mutation for every subject (see the module docstring)."""
    shorts = sorted({s for subj in (*SUBJECTS, CONTROL) for s in subj.reaches})
    texts = {short: pkg.path(short).read_text() for short in shorts}  # type: ignore[attr-defined]
    names = pkg.names()  # type: ignore[attr-defined]
    live = {
        short: [m for m in live_mutations(pkg.module(short), short) if _editable(pkg, short, m)]  # type: ignore[attr-defined]
        for short in shorts
    }
    plan: list[Mutation] = []
    for subject in SUBJECTS:
        for short in subject.reaches:
            plan += _edits(subject, short, texts[short], names)
            plan += [Mutation(k, subject.name, short, op, w, d, p) for k, op, w, d, p in live[short]]
        plan += _env(subject, texts) + _args(subject) + _others(subject) + _data(subject, pkg.root)  # type: ignore[attr-defined]
    return plan + _control(texts, names, live)


def _control(texts: dict[str, str], names: set[str], live: dict[str, list]) -> list[Mutation]:
    """Semantic changes of the helper only a computed getattr reaches: each must be STALE."""
    (short,) = CONTROL.reaches
    out = [m for m in _edits(CONTROL, short, texts[short], names) if m.kind in ("edit+reload", "unrelated function")]
    out += [
        Mutation(k, CONTROL.name, short, op, w, d, p)
        for k, op, w, d, p in live[short]
        if k in ("monkeypatch", "__code__ swap")
    ]
    # the helper is named nowhere (that is the point), so its edits would read "unrelated"
    kinds = {"unrelated function": "edit+reload"}
    return [
        dataclasses.replace(m, kind=f"control: {kinds.get(m.kind, m.kind)}")
        for m in out
        if CONTROL_HELPER in m.detail or CONTROL_HELPER in m.where
    ]


def write_plan(pkg: object, scratch: Path, out: Path) -> None:
    import sys

    sys.path.insert(0, str(scratch))
    plan = build_plan(pkg)
    out.write_text(json.dumps([mutation_to_json(m) for m in plan]))


def fast_subset(plan: list[Mutation], per_kind: int) -> list[int]:
    """Indices of at most ``per_kind`` mutations of each kind, spread over the subjects; and
    at least one of each neutral group (:func:`model.neutral_group`) per subject: a miss for
    nothing is a property of a subject's shape (a regression that made every reload of a
    helper fp8_quant's instance reaches re-trace went through a sample that held one
    fp8_quant neutral mutation of 23)."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    neutral: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, m in enumerate(plan):
        by_kind[m.kind if m.subject != CONTROL.name else "control"].append(i)
        group = neutral_group(m)
        if group is not None and m.subject != CONTROL.name:
            neutral[(m.subject, group)].append(i)
    chosen: set[int] = set()
    for indices in by_kind.values():
        step = max(1, len(indices) // per_kind)
        chosen.update(indices[::step][:per_kind])
    for indices in neutral.values():
        if chosen.isdisjoint(indices):
            chosen.add(indices[len(indices) // 2])
    return sorted(chosen)
