"""The launcher: a FlyDSL ``@jit`` function whose warm call skips the trace.

Contract
--------
A :class:`~flydsl_runtime.launch.jit.Launcher` wraps FlyDSL's ``JitFunction`` and keeps, in
process, one compiled entry per key ``(dependency digest, argument signatures, target and
code-gen env, device, compile hints, bound self)``.

Per call (:mod:`.jit`):

1. The owner's dependency state is checked by its guard (identity checks only); a failed
   guard re-takes the state (:mod:`.states`: found again, judged by the drift policy, or new).
2. The key is made from that state's digest, the arguments' signatures
   (:mod:`flydsl_runtime.trace.argsig`, bound by :mod:`flydsl_runtime.trace.binder`) and the
   environment's part (target, env key, device: memoized on the environment's version).
3. An entry under the key whose environment reads and extra guards still hold is a hit: its
   stored ``CompiledFunction`` runs (``None`` under ``COMPILE_ONLY=1``); under
   ``FLYDEPS_VERIFY`` a hit may be re-traced first (:mod:`.verify`).

A plain call takes the warm path: ``Launcher.__call__`` is the C ``_warmcall.WarmCall``
(built from ``_warmcall.c``) or, without it or under ``FLYDEPS_WARMCALL=0``,
``Launcher._py_call``, its specification; each makes the tests above in the same order and
hands anything else to ``Launcher._call``, the general path.

On a miss (:mod:`.miss`, ``MissPath._miss``, under the launcher's lock), in order: an entry
another thread built meanwhile; an undecided data drift judged by FlyDSL's IR (a re-trace,
:func:`.verify.traced_ir_key`); the miss explained (:mod:`flydsl_runtime.trace.explain`); the
persistent index's row (:mod:`flydsl_runtime.persist.index`) loaded from FlyDSL's disk cache
(:mod:`flydsl_runtime.persist.diskcache`), no trace; ``FLYDEPS_AOT=strict``'s error
(:mod:`flydsl_runtime.persist.strict`); FlyDSL's trace and compile as a managed build
(:mod:`flydeps.builds.protocol`), its environment reads recorded (:mod:`.hooks`); the trace
judged (its own writes adopted, anything else: returned, not kept); the entry stored; its
row recorded.

Modules, each importing only those listed before it (no import cycle): :mod:`.hooks`
(FlyDSL patched to report trace env reads, AST rewrites and class-cache writes; unwrappers
of FlyDSL's types), :mod:`.records` (``Entry``, ``CacheInfo``, owner states, and
``LauncherView``: what :mod:`.verify` reads of a launcher), :mod:`.verify` (re-traced hits,
``StaleArtifactError``), :mod:`.states` (dependency-state bookkeeping), :mod:`.miss` (the
miss path), :mod:`.jit` (``Launcher`` and ``jit``: the call paths, the key, the signature).

This package's ``__init__`` imports nothing: importing :mod:`flydsl_runtime` sets the hooks.
"""
