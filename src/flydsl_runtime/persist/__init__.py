"""The persistent side: what a new process can start a kernel from without tracing.

Contract: :mod:`.index` maps a launcher's cross-process key (fingerprint, signatures,
target, environment, recorded reads) to FlyDSL's artifact, in an SQLite file opened by
:mod:`.sqlitefile` and trusted only where no other user can write; :mod:`.diskcache` reads
FlyDSL's own disk cache on the same terms; :mod:`.manifest` is the AOT manifest
(``FLYDEPS_RECORD``: each specialization a process calls, appended once, as JSON lines a
build reads); :mod:`.strict` is ``FLYDEPS_AOT=strict``: a call
the shipped index cannot serve is an error that says which part of its key differs. The
ROCm root is asked of FlyDSL's loaded C API library (``persist/_capi.c``). Below the launcher,
which consults it on a miss; never imports it.
"""
