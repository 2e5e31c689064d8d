"""Scoring of PyCG-format call graphs against the hand-written cases of ``tests/static/callgraph``.

Contract: a call graph is PyCG's JSON ``{"caller": ["callee", ...]}``; it is scored as a
set of ``(caller, callee)`` edges (keys without callees add nothing). Per edge:
precision = found / predicted, recall = found / expected; an empty side counts as a
perfect score (nothing predicted is nothing wrong, nothing expected is nothing missed).
Scores add up (micro-average), so a category's score weighs each edge once. Shared by
``test_callgraph_suite.py`` and ``benchmarks/bench_callgraph.py``; it imports nothing of
flydeps, so it scores any tool.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CASES_DIR", "Case", "Edge", "Score", "discover_cases", "edges_of", "markdown_table", "score", "total"]

CASES_DIR = Path(__file__).resolve().parent / "callgraph"

Edge = tuple[str, str]


@dataclass(frozen=True)
class Case:
    """One program: ``<category>/<name>/`` holding ``main.py`` (maybe more) and ``callgraph.json``."""

    category: str
    name: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.category}/{self.name}"

    def expected(self) -> dict[str, list[str]]:
        loaded: dict[str, list[str]] = json.loads((self.path / "callgraph.json").read_text(encoding="utf-8"))
        return loaded

    def sources(self) -> list[Path]:
        """Every ``.py`` file of the case, sorted (what PyCG is given as entry points)."""
        return sorted(self.path.rglob("*.py"))


@dataclass(frozen=True)
class Score:
    """Counts behind precision and recall; ``a + b`` pools two scores edge by edge."""

    found: int = 0
    predicted: int = 0
    expected: int = 0

    @property
    def precision(self) -> float:
        return self.found / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    def __add__(self, other: Score) -> Score:
        return Score(self.found + other.found, self.predicted + other.predicted, self.expected + other.expected)


def discover_cases(root: Path = CASES_DIR) -> list[Case]:
    """All cases under ``root``, sorted by category then name."""
    return [
        Case(path.parent.parent.name, path.parent.name, path.parent) for path in sorted(root.glob("*/*/callgraph.json"))
    ]


def edges_of(graph: Mapping[str, Iterable[str]]) -> frozenset[Edge]:
    """The ``(caller, callee)`` pairs of a PyCG-format mapping."""
    return frozenset((caller, callee) for caller, callees in graph.items() for callee in callees)


def score(predicted: Mapping[str, Iterable[str]], expected: Mapping[str, Iterable[str]]) -> Score:
    """Per-edge counts of ``predicted`` against ``expected``."""
    got, want = edges_of(predicted), edges_of(expected)
    return Score(len(got & want), len(got), len(want))


def total(scores: Iterable[Score]) -> Score:
    pooled = Score()
    for item in scores:
        pooled = pooled + item
    return pooled


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def markdown_table(rows: Mapping[str, Mapping[str, Score]], tools: Sequence[str], cases: Mapping[str, int]) -> str:
    """``| category | cases | edges | <tool> precision | <tool> recall | ... |``, then an overall row.

    ``rows`` maps a category to each tool's pooled score; ``cases`` counts the cases of a category.
    """
    header = ["category", "cases", "edges"] + [f"{tool} {what}" for tool in tools for what in ("precision", "recall")]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|" + "---:|" * (2 * len(tools))]
    overall = {tool: total(rows[cat][tool] for cat in rows) for tool in tools}
    table_rows = [(cat, cases[cat], rows[cat]) for cat in sorted(rows)]
    table_rows.append(("**overall**", sum(cases.values()), overall))
    for name, count, scores in table_rows:
        expected = scores[tools[0]].expected if tools else 0
        cells = [name, str(count), str(expected)]
        for tool in tools:
            cells += [_pct(scores[tool].precision), _pct(scores[tool].recall)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
