"""Observed reads: what a build reads that bytecode cannot predict, recorded while it runs.

Contract: a build wrapped in :func:`.environ.recording` has every read of ``os.environ``,
every file, directory listing and file-metadata read (:mod:`.filereads`, through the audit
hook) and every memoized reader it consulted (:mod:`.memoreads`) noted as an
:class:`.environ.EnvReads`; a consumer re-checks those reads on a hit with
:meth:`~.environ.EnvReads.holds` (generated code: reads and comparisons only). Derived reads
(``=name:arg``) are the one mechanism for state a library answers (device properties,
torch's flags): a family registered with :func:`.environ.derive_family` is noted while a
trace records and re-asked on every check. Modules, bottom to top: :mod:`.environ` (the
recorder, derived reads), :mod:`.filereads` (files; attaches itself to the recorder),
:mod:`.memoreads` (``functools.lru_cache`` wrappers, by generation).

Importing this package attaches :mod:`.filereads` to :mod:`.environ`, so a recording never
misses the files a build reads.
"""

from . import filereads as _filereads  # noqa: F401  (attaches the file observer to the recorder)
