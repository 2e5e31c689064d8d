"""Real FlyDSL 0.5 kernels in the shapes real kernel repositories have (the mutation oracle's subjects).

Each module compiles for real on a CPU-only machine (``ROCM_PATH`` + ``ARCH=gfx942``) and is
small enough to compile in well under a second. Together they carry every shape the
dependency key must see through (issue 7):

* ``memops``: memory helpers wrapped by a library decorator (``kerneldeco.traced``, a
  ``functools.wraps`` decorator installed as a distribution) and by FlyDSL's own
  ``flydsl.expr.meta.dsl_loc_tracing``; a memo dict and a registry written while tracing;
  an environment variable read while tracing; keyword-only defaults; an unrelated helper.
* ``norms``: RMSNorm and LayerNorm kernels with ``@flyc.kernel(known_block_size=[...])``,
  ``fx.Constexpr[float]`` epsilon with a default, a defaulted ``stream`` the callers omit,
  ``os.getenv`` read while tracing, keyword calls into the helpers.
* ``softmax``: a kernel nested in a plain builder function reading the builder's locals
  (closure cells), built at import time.
* ``quant``: an fp8-quant-like kernel on buffer resources (``make_buffer_tensor``), held by a
  class whose ``@flyc.jit`` method launches a ``@flyc.kernel`` method; class attributes and
  instance attributes read while tracing.
* ``tuned``: a launcher whose helper lists ``tuning/`` and ``json``-loads the table of the
  target named by an environment variable (else ``default.json``) while tracing: the values
  become IR constants, so the data files are inputs of the build.

The oracle (``tests/oracle``) copies this package under a fresh name for every mutation, so
nothing here is ever edited in place.
"""
