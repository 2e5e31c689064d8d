"""Call-graph facts: the data one module's AST yields for the PyCG-style value flow.

Contract: :class:`FlowFacts` is the read-only result of
:func:`flydeps.static.calls.collect.flow_facts`, a pure function of the file's bytes, and the
input of the solver (:mod:`flydeps.static.calls.solve`); :data:`FACTS_SHAPE` is its stored
(validated JSON) form in the parse cache. The facts write down, mostly
flow-insensitively, what the module's code does with values that may be callable, in the
spirit of PyCG's *assignment graph*:

* **slots** hold values: a variable of a scope (``v``), a function's return values
  (``r``) and yielded values (``y``), the elements of a container literal (``e``);
* **expressions** (:attr:`FlowFacts.exprs`, numbered) say how a value is computed from
  slots and other expressions: a name, an attribute, a call's result, a subscript, a
  container literal, a function or class object, ``super()``, the elements an iteration
  yields, a decorator applied, an instance of a caught exception class;
* **facts** (:attr:`FlowFacts.facts`) are the statements of the flow: ``assign`` (slot <-
  expression), ``setattr``/``setitem`` (a store through a computed object: ``self.x =
  ...``), ``call`` (a call site: caller, callee expression and arguments), ``mcall`` (an
  implicit method call: ``with`` -> ``__enter__``/``__exit__``, ``for`` ->
  ``__iter__``/``__next__``), ``construct`` (``raise Cls``: an instance is made), ``sig``
  (a function's parameters and flags), ``use`` (an attribute read, which calls a
  property's getter).

Scopes are named as in the file summary (``f.<locals>.g``, ``C.m``, ``f#2`` for a repeated
name); lambdas as PyCG names them, per enclosing scope in source order
(``<lambda1>``, ``f.<locals>.<lambda2>``). A class body is the caller, named by the class
(as in PyCG), of what its statements call (decorators of its methods included).
"""

from __future__ import annotations

from typing import NamedTuple

from ..store import Fixed, Int, Record, Seq, Str

__all__ = ["FACTS_SHAPE", "FACTS_VERSION", "Entry", "FlowFacts", "MODULE"]

#: The scope name of a module's own (import-time) code.
MODULE = ""

Entry = tuple[str, str, tuple[int, ...]]


class FlowFacts(NamedTuple):
    """The flow facts of one module (see the module docstring).

    ``exprs[i]`` is ``(op, text, operands)``; ``facts`` are ``(kind, text, operands)``;
    ``scopes`` are ``(name, kind, parent)`` for every code of the file (``module``,
    ``function``, ``lambda``, ``class``), parents first."""

    exprs: tuple[Entry, ...]
    facts: tuple[Entry, ...]
    scopes: tuple[tuple[str, str, str], ...]


#: Version of the stored form of :class:`FlowFacts` (the parse cache keeps one entry of
#: facts per file content next to its summary: :mod:`flydeps.static.parse`). The kind of
#: those entries also carries a digest of the extractor's modules, so editing it is enough.
FACTS_VERSION = 2
_ENTRY_SHAPE = Fixed(Str, Str, Seq(Int))
#: Field-by-field validation of a stored :class:`FlowFacts` (see :mod:`flydeps.static.store`).
FACTS_SHAPE = Record(FlowFacts, Seq(_ENTRY_SHAPE), Seq(_ENTRY_SHAPE), Seq(Fixed(Str, Str, Str)))
