"""Reading code: what a code object does and where code comes from, never running it.

Contract: functions of code objects, never of live functions, modules or values, so the
runtime discovery (``fn.__code__``) and the static front-end (``compile()`` of a file that
is never imported) get the same bytes within one Python version. Modules, bottom to top:
:mod:`.opcodes` (this interpreter's tables), :mod:`.normalize` (compiler layout choices
undone), :mod:`.encoding` (the encodings both decoders share: constants, the names read),
:mod:`.scan` (the direct ``co_code`` decoder; its inner loop in C, ``code/_scanext.c``),
:mod:`.disref` (the same bytes through ``dis``: the reference and fallback),
:mod:`.bytecode` (digests, name references, the imports code runs), :mod:`.origin` (user
code or a library leaf, by installed distribution), :mod:`.graphbuild` (graph
construction both front-ends share: leaves named and digested alike).
"""
