"""Runtime discovery: live objects and their bytecode -> a dependency graph.

Contract: :func:`.discover.discover` walks from root functions, classes, bound methods
and partials through the names their code reads (:mod:`.resolve`: globals, closures,
attributes per owner class, imports the code runs, lazy packages), digests code with
:mod:`flydeps.code` and data with :mod:`flydeps.values`, stops at library leaves, and
returns a :class:`~flydeps.graph.DepGraph` with the live bindings it relied on (the
:class:`.discover.Discovery`). It never calls user code, except the hooks a consumer
registers (``register_unwrapper``). Public entry: ``flydeps.discover``.
"""
