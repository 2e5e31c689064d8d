"""The static front-end: ``DepGraph`` from source files, never importing them.

Contract: :func:`analyze` is the entry point (used by ``flydeps graph|hash|diff``); it
returns an :class:`Analysis` (graph + ``path:line: message`` diagnostics) and never raises
for bad input. Stages, in data-flow order: :mod:`.project` (roots, module <-> path),
:mod:`.extract` / :mod:`.expressions` / :mod:`.summary` (one file -> summary), :mod:`.parse` (parse cache,
process pool), :mod:`.symbols` (symbol tables, MRO), :mod:`.resolve` (graph),
:mod:`.results` (whole-result cache), :mod:`.analyze` (pipeline), :mod:`.report`
(formats), :mod:`.diff` (git revisions). The call graph, solved only when asked for
(``--format pycg``, ``--calls``): :mod:`.callscopes` / :mod:`.callexprs` /
:mod:`.callgraph` (one file -> :mod:`.callfacts` flow facts, cached next to its summary),
:mod:`.callstate` / :mod:`.callsemantics` / :mod:`.callflow` (facts -> :mod:`.callresult`
call graph), :mod:`.callstore` (its stored form in the result cache). :mod:`.migrate` is the libcst codemod behind
``flydeps migrate`` (rewrites files; not part of the analysis). See docs/static.md.
"""

from .analyze import Analysis, analyze
from .project import Diagnostic

__all__ = ["Analysis", "Diagnostic", "analyze"]
