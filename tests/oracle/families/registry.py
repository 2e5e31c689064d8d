"""The families and their cases, by name.

Contract
--------
:data:`FAMILIES` maps a family's name to the module that defines its ``CASES`` (a tuple of
:class:`~families.model.Case`); :func:`cases` and :func:`case` look them up and raise
``KeyError`` naming the known names for an unknown one.
"""

from __future__ import annotations

import importlib

from families.model import Case

FAMILIES: dict[str, str] = {
    "objects": "families.objects",
    "callables": "families.callables",
    "imports": "families.imports",
    "memo": "families.memo",
    "procstate": "families.procstate",
    "threads": "families.threads",
    "builders": "families.builders",
    "control": "families.control",
}


def family_cases(family: str) -> tuple[Case, ...]:
    if family not in FAMILIES:
        raise KeyError(f"no family {family!r}; families: {', '.join(FAMILIES)}")
    found: tuple[Case, ...] = importlib.import_module(FAMILIES[family]).CASES
    return found


def cases(family: str, names: list[str] | None = None) -> list[Case]:
    every = family_cases(family)
    if not names:
        return list(every)
    known = {c.name: c for c in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KeyError(f"family {family!r} has no case {unknown[0]!r}; cases: {', '.join(known)}")
    return [known[n] for n in names]


def case(family: str, name: str) -> Case:
    return cases(family, [name])[0]
