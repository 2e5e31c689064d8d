"""The call graph's result type and its PyCG names.

Contract: :class:`CallGraph` is the read-only answer of
:func:`flydeps.static.calls.solve.build_call_graph` (stored by :mod:`flydeps.static.calls.store`,
printed by :mod:`flydeps.static.report`); :func:`pycg_code` and :func:`pycg_callee` name
codes and callees as PyCG does, for ``--format pycg`` and the tree/json call lists;
:func:`bound_diagnostics` turns the slots where the solver's per-slot bound dropped values
(``CallGraph.saturated``) into one note per slot, naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..project import Diagnostic

__all__ = ["CallGraph", "Callee", "bound_diagnostics", "pycg_callee", "pycg_code", "slot_name"]

# What each kind of solver slot holds, for the diagnostic that names a saturated slot.
_SLOT_KINDS = {
    "v": "variable",
    "e": "container element",
    "iattr": "instance attribute",
    "r": "return value of",
    "y": "values yielded by",
    "keys": "keys of container",
}

#: A callee: ``("code", module, scope)`` (a function, method or lambda of the project) or
#: ``("external", dotted)`` (library code, ``builtins.len``); what an instance attribute
#: holds may also be ``("instance", module, class)`` or ``("class", module, class)``.
Callee = tuple[str, ...]


@dataclass(frozen=True)
class CallGraph:
    """Who calls what, per code of the analysed modules.

    ``codes`` are ``(module, scope, kind)`` for every code (``scope`` '' and kind
    ``module`` for a module's import-time code); ``calls`` maps ``(module, scope)`` to its
    callees; ``attributes`` maps ``(module, class, name)`` to the code, instances and
    classes that ``self.name`` may hold in a method of the class (assigned through an
    instance of it, of a base or of a subclass: ``self.act = self.relu``, ``self.helper =
    Helper()``)."""

    codes: tuple[tuple[str, str, str], ...]
    calls: Mapping[tuple[str, str], frozenset[Callee]]
    attributes: Mapping[tuple[str, str, str], frozenset[Callee]]
    #: ``(module, slot name)`` of each slot that hit the solver's bound of values and
    #: dropped some (calls read through it may be missing); see :func:`slot_name`.
    saturated: tuple[tuple[str, str], ...] = ()

    def pycg(self) -> dict[str, list[str]]:
        """PyCG's interchange format: ``{"caller": ["callee", ...]}``, sorted."""
        out: dict[str, set[str]] = {pycg_code(m, s): set() for m, s, _ in self.codes}
        for (module, scope), callees in self.calls.items():
            out.setdefault(pycg_code(module, scope), set()).update(pycg_callee(c) for c in callees)
        return {k: sorted(v) for k, v in sorted(out.items())}


def pycg_code(module: str, scope: str) -> str:
    """``pkg.mod`` for module code, ``pkg.mod.outer.inner`` for a nested function."""
    if not scope:
        return module
    qual = scope.replace(".<locals>.", ".")
    return f"{module}." + ".".join(part.partition("#")[0] for part in qual.split("."))


def pycg_callee(callee: Callee) -> str:
    """The PyCG name of a callee (``instance of pkg.mod.Cls`` for an attribute's instance)."""
    if callee[0] in ("code", "class"):
        return pycg_code(callee[1], callee[2])
    if callee[0] == "instance":
        return "instance of " + pycg_code(callee[1], callee[2])
    dotted = callee[1]
    return "<builtin>." + dotted[len("builtins.") :] if dotted.startswith("builtins.") else dotted


def slot_name(slot: tuple[str, ...]) -> tuple[str, str]:
    """``(module, readable name)`` of a solver slot: ``("v", "m", "f", "x")`` is
    ``("m", "variable m.f.x")``; an unknown kind is named by its parts."""
    kind, module, *rest = slot
    dotted = ".".join(part for part in (module, *rest) if part)
    return module, f"{_SLOT_KINDS.get(kind, kind)} {dotted}"


def bound_diagnostics(graph: CallGraph, path_of: Callable[[str], str | None], bound: int) -> Iterable[Diagnostic]:
    """One note per saturated slot of ``graph``, at the file of its module (``path_of``;
    the module name when it has none): the calls read through it may be incomplete."""
    for module, name in graph.saturated:
        yield Diagnostic(
            path_of(module) or module,
            0,
            f"call graph: {name} reached the bound of {bound} values per slot; calls through it "
            "may be missing (a class hierarchy or container this wide is not followed in full)",
            note=True,
        )
