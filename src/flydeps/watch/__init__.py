"""Watchers: O(1) "has anything watched changed?" for the hot paths of guards.

Contract: :mod:`.watchers` answers with one counter read per check: CPython >= 3.12 dict,
type and function watchers (C in ``watch/_watchext.c``, else ctypes), or on 3.10/3.11 the PEP
509 version tags of the watched dicts (C in ``watch/_dictver.c``); both export a C API capsule
the factory's C hit path reads. :mod:`.audit` counts function-attribute writes through an
audit hook where no function watcher exists (and forwards file events to
:mod:`flydeps.observe.filereads`). Imports only :mod:`flydeps.settings`.
"""
