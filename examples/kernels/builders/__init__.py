"""Kernels built the way half of a real FlyDSL repository builds them.

* ``softmax``: a plain builder function (no cache) whose nested kernel reads the builder's
  locals through closure cells, ``@flyc.kernel(known_block_size=[threads, 1, 1])`` with a
  builder local, nested comprehensions, and a delegating ``@lru_cache`` factory;
* ``structs``: two builders each with its own ``@fx.struct class SharedStorage``;
* ``patched``: ``_TensorWithIndex.copy = ASTRewriter.transform(_TensorWithIndex.copy)``
  after the class statement, and a module-level kernel with decorator arguments;
* ``compat``: ``try: from flydsl... import fast_exp2`` / ``except ImportError: def fast_exp2``.
"""
