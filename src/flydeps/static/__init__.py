"""The static front-end: ``DepGraph`` from source files, never importing them.

Contract: :func:`analyze` is the entry point (used by ``flydeps graph|hash|diff``); it
returns an :class:`Analysis` (graph + ``path:line: message`` diagnostics) and never raises
for bad input. Stages, in data-flow order: :mod:`.project` (roots, module <-> path),
:mod:`.extract` / :mod:`.expressions` / :mod:`.moduleflow` / :mod:`.summary` (one file ->
summary), :mod:`.parse` (parse cache, process pool: :mod:`.processes`, stored documents:
:mod:`.store`), :mod:`.symbols` / :mod:`.libnames` (symbol tables, MRO, library names where
they are defined), :mod:`.resolve` (graph), :mod:`.results` (whole-result cache),
:mod:`.analyze` (pipeline), :mod:`.report` (formats), :mod:`.diff` (git revisions). The
call graph, solved only when asked for (``--format pycg``, ``--calls``), is the subpackage
:mod:`.calls`. The codemod behind ``flydeps migrate`` is :mod:`flydeps.migrate`, above this
package. See docs/static.md.
"""

from .analyze import Analysis, analyze
from .project import Diagnostic

__all__ = ["Analysis", "Diagnostic", "analyze"]
