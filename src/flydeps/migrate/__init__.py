"""The codemod behind ``flydeps migrate``: moves a kernel repository onto flydeps.

Contract: :func:`.tree.migrate_paths` rewrites files (only when asked to write; a
temporary file and ``os.replace``), never raises for bad input (each problem is a
``path:line: message`` on its file), and decides which ``lru_cache`` factories to convert
from one whole-tree static analysis (:mod:`flydeps.static`), remembered per file in
:mod:`.memo`. :mod:`.codemod` is the libcst transformer, :mod:`.imports` places the
imports it adds by the project's own ruff/isort settings, :mod:`.isolate` keeps a
crashing native parse from taking the command down. Nothing here is imported by the
analysis itself.
"""
