"""Files flydeps keeps: the bottom of everything that touches the disk.

Contract: :mod:`.memofile` is the one mechanism for private on-disk entries (a private
directory, entries checked for owner and mode before they are read, written by a
temporary file and ``os.replace``, never trusted from a directory another user can write);
every store and memo of flydeps and flydsl_runtime goes through it. :mod:`.codegen`
compiles generated source (guards, the environment's ``holds``) once per interpreter
build and keeps the code objects there. :mod:`.fsmeta` reads file metadata in bulk (C in
``store/_statext.c`` where built, else Python) for a new process's first call. :mod:`.caches`
is what ``flydeps cache stats|clear|prune`` does to all of them. Imports only
:mod:`flydeps.settings` and :mod:`flydeps.errors`.
"""
