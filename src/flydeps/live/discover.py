"""Runtime discovery: live objects and their bytecode -> :class:`~flydeps.graph.DepGraph`.

Contract: reads live objects (functions, code, closure cells, defaults, module and class
namespaces) and records, next to the graph, every :class:`~flydeps.values.bindings.Binding`
the graph was built from so a guard can re-check them. It never calls user code: names
are resolved through real namespace dicts, values are snapshotted structurally
(:mod:`flydeps.values.snapshot`). Code outside the user's roots (stdlib, site-packages, flydeps
itself) is a leaf ``external:`` node identified by ``distribution==version``. What
cannot be resolved becomes an ``unresolved:`` node; nothing is dropped. The walk is a
work list, so deep helper chains and cycles need no recursion. Name resolution (globals,
builtins, attribute chains, ``self.x``, imports inside functions) lives in
:mod:`flydeps.live.resolve`; objects are dispatched on ``type(obj)`` (:mod:`flydeps.values.objects`).
"""

from __future__ import annotations

import _thread
import contextlib
import contextvars
import enum
import functools
import gc
import logging
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import CodeType, FunctionType, MappingProxyType, MethodType, ModuleType
from typing import Any

from ..code import origin as _origin
from ..code import scan as _codescan  # noqa: F401  (the code decoder: loaded with discovery, not by the first fingerprint)
from ..code.bytecode import _analyze, code_digest, code_refs, getattr_reads, import_reads, is_function_code, qualname_of
from ..errors import DiscoveryError
from ..graph import DepGraph, EdgeKind, Location, Node, NodeKind, node_id
from ..observe import memoreads as _memoreads
from ..values.bindings import _CODE_TYPES, MISSING, Binding, BindingKind, class_dict, dict_items, is_a, is_code
from ..values.objects import (
    TypeTable,
    c_descriptor_name,
    c_module,
    code_members,
    defining_class,
    function_module,
    function_qualname,
    instance_dict,
    is_c_callable,
    is_external_type,
    is_member_code,
    library_innermost,
    library_wrapped,
    location,
    module_name,
    module_of,
    object_qualname,
    safe_name,
    type_bases,
    type_module,
    type_mro,
    type_qualname,
)
from ..values.snapshot import SNAPSHOT_LIMIT, MutableWatch, Snapshot, describe, sequence_items, snapshot
from .resolve import NameResolver
from .resolve import parts_digest as _digest

__all__ = ["Discovery", "discover", "gc_paused", "note_code_rewrite", "register_unwrapper"]

log = logging.getLogger("flydeps")

Unwrapper = Callable[[object], Iterable[tuple[str, object]]]
_UNWRAPPERS = TypeTable()  # keyed by identity: a user metaclass's __eq__/__hash__ never runs
# id(func) -> (weak reference to func, rewritten code now installed, original code the user
# wrote). Keyed by id with the identity re-checked through the weak reference: one C-level
# dict lookup per function walked (a WeakKeyDictionary lookup runs Python code).
_REWRITES: dict[int, tuple["weakref.ref[FunctionType]", CodeType, CodeType]] = {}
_WARNED_OVERSIZED: set[str] = set()
_FUNC_ATTRS = ("__code__", "__defaults__", "__kwdefaults__")
_ATTR = BindingKind.ATTR
_CO_QUALNAME = hasattr(CodeType, "co_qualname")  # 3.11+
_NO_TAGS: frozenset[str] = frozenset()
# Records are NamedTuples; the hot path builds them with tuple.__new__ (the NamedTuple's
# own __new__ is a Python function around the same call).
_new = tuple.__new__


def register_unwrapper(type_: type, fn: Unwrapper) -> None:
    """Teach discovery to see through instances of ``type_`` (and subclasses).

    ``fn(obj)`` yields ``(label, value)`` pairs to walk, e.g. a JIT wrapper yields
    ``("func", obj.func)``. Registered unwrappers replace the generic attribute walk.
    A label starting with ``=`` marks a *setting* of the wrapper (a decorator argument,
    e.g. ``("=known_block_size", (64, 1, 1))``): the settings are digested together into a
    ``<wrapper>#settings`` node of kind OBJECT (a change is a change of that code object,
    not data drift) and are not walked."""
    if not is_a(type_, type) or not callable(fn):
        raise TypeError(f"register_unwrapper(type_, fn) needs a class and a callable, got {type_!r}, {fn!r}")
    _UNWRAPPERS.add(type_, fn)


def note_code_rewrite(func: FunctionType, original_code: CodeType) -> None:
    """Record that ``func.__code__`` is a rewrite (e.g. an AST transform) of ``original_code``.

    The function then digests as the original (what the user wrote) while the rewritten
    code's references are walked too; swapping the original for the rewrite is not a
    user change."""
    if type(func) is not FunctionType or type(original_code) is not CodeType:
        raise TypeError("note_code_rewrite(func, original_code) needs a Python function and a code object")
    key = id(func)

    def forget(ref: "weakref.ref[FunctionType]") -> None:
        if _REWRITES.get(key, (None,))[0] is ref:
            del _REWRITES[key]

    _REWRITES[key] = (weakref.ref(func, forget), func.__code__, original_code)


def _rewrite_of(fn: FunctionType) -> tuple[CodeType, CodeType] | None:
    """(rewritten code, original code) noted for ``fn`` by :func:`note_code_rewrite`."""
    entry = _REWRITES.get(id(fn))
    return (entry[1], entry[2]) if entry is not None and entry[0]() is fn else None


@dataclass(frozen=True)
class Discovery:
    """A graph plus the live bindings and mutable values it was built from."""

    graph: DepGraph
    bindings: tuple[Binding, ...]
    mutables: tuple[tuple[str, MutableWatch], ...]  # (node id, watch)
    # Nodes whose digest includes an object's identity (a value too large to snapshot, an
    # object with no readable state): the digest holds in this process only.
    identified: tuple[str, ...] = ()


def discover(obj: object, *, owner: type | None = None) -> DepGraph:
    """The dependency graph of ``obj`` (function, method, class, callable object, ...).

    ``owner`` is the class through which methods are looked up: ``self.helper`` inside
    ``Base.run`` resolves on ``owner``'s MRO, so ``owner=Sub`` sees Sub's override.
    ``None`` raises :class:`DiscoveryError` (as :func:`flydeps.fingerprint` does).
    """
    if obj is None:
        raise DiscoveryError("cannot discover None: pass the function, method, class or callable to analyse")
    return discover_roots([(obj, owner, "root")]).graph


def discover_roots(roots: Sequence[tuple[object, type | None, str]], *, positions: bool = False) -> Discovery:
    """Discover several roots at once: ``(object, owner, hint id for non-code roots)``.

    ``positions=True`` digests functions with their source locations (file name, lines,
    columns: :func:`flydeps.code.bytecode.code_digest`), for builds whose product embeds them."""
    with gc_paused():
        return _walk(roots, positions)  # the walker's own tables are freed before collection resumes


def _walk(roots: Sequence[tuple[object, type | None, str]], positions: bool) -> Discovery:
    walker = _Walker(positions)
    ids = tuple(dict.fromkeys(walker.visit(obj, owner, hint) for obj, owner, hint in roots))
    walker.run()
    return Discovery(walker.graph(ids), tuple(walker.bindings), tuple(walker.mutables), tuple(walker.identified))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a graph is built.

    A walk allocates many small objects (bindings, nodes, edges, ids) and frees none of
    them until it ends, so each collection the allocations trigger scans the whole heap
    for nothing (in a process holding torch and FlyDSL, a large part of a cold
    fingerprint). Discovery runs no user code, so no finalizer is delayed; a collector the
    user turned off stays off, and one that was on is turned back on even on error."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Walker(NameResolver):
    """Builds nodes immediately and expands them from a work list."""

    def __init__(self, positions: bool = False) -> None:
        super().__init__()
        self.positions = positions  # digest source locations too (debug info in the product)
        self.bindings: list[Binding] = []
        self.mutables: list[tuple[str, MutableWatch]] = []
        self.identified: list[str] = []  # nodes digested with an object identity (Discovery.identified)
        self.memo: dict[tuple[int, ...] | tuple[int, int, str], str] = {}
        self.keep: list[object] = []  # memo keys are id()s: keep their objects alive
        self.work: deque[Callable[[], None]] = deque()
        self.live: set[str] = set()  # function nodes whose live object was expanded
        self.claims: dict[str, tuple[object, CodeType]] = {}  # function node id -> (function or code, code)
        self.walked: set[tuple[str, int]] = set()  # (node, id(code)) already walked
        # Bindings recorded, by (id(container), key, id(expected), node, label): a name read
        # through several chains (``mod.a``, ``mod.b``) is one binding, not one per chain.
        self.bound: set[tuple[int, str, int, str, str]] = set()
        # name (its sys.modules entry) or (name, id(module)) -> is library code
        self.external_modules: dict[str | tuple[str, int], bool] = {}
        self.unwrappers: dict[int, Unwrapper | None] = {}  # id(type) -> registered unwrapper

    def run(self) -> None:
        while self.work:
            self.work.popleft()()

    # -- nodes -----------------------------------------------------------------------
    def _claim(self, base: str, obj: object, code: CodeType) -> str:
        """The node id for function ``obj`` (or bare ``code``) named ``base``.

        Distinct function objects never share a node: two closures of one ``def``, a
        property's getter and setter, two lambdas in one table get ``base``, ``base#2``,
        ``base#3`` in the order they are reached (the static front-end numbers them in
        source order). A bare code object seen first as a constant of its enclosing code
        is the same node as the live function that runs it."""
        n = 1
        while True:
            nid = base if n == 1 else f"{base}#{n}"
            holder = self.claims.get(nid)
            if holder is None or holder[0] is obj:
                self.claims[nid] = (obj, code)
                return nid
            if holder[1] is code and (type(holder[0]) is CodeType or type(obj) is CodeType):
                if type(holder[0]) is CodeType:  # the live function takes over its placeholder
                    self.claims[nid] = (obj, code)
                return nid
            n += 1

    def bind(self, kind: BindingKind, container: object, key: str, expected: object, node: str, label: str) -> None:
        seen = (id(container), key, id(expected), node, label)  # both objects stay alive in the binding
        if seen in self.bound:
            return
        self.bound.add(seen)
        # An object discovery sees through (a JIT or kernel wrapper) is code too: rebinding
        # a kernel global to a new kernel is a code change, never data drift.
        code = (
            kind is _ATTR
            or issubclass(type(expected), _CODE_TYPES)
            or (bool(_UNWRAPPERS) and self.unwrapper(expected) is not None)
        )
        self.bindings.append(_new(Binding, (kind, container, key, expected, node, label, code)))

    def unwrapper(self, obj: object) -> Unwrapper | None:
        """The unwrapper registered along ``type(obj)``'s MRO, looked up once per type and
        walk (the types stay alive: their instances are kept by the walk)."""
        if not _UNWRAPPERS:
            return None
        t = type(obj)
        found = self.unwrappers.get(id(t), MISSING)
        if found is MISSING:
            found = self.unwrappers[id(t)] = _UNWRAPPERS.along_mro(t)
            self.keep.append(t)
        return found  # type: ignore[return-value]

    def is_external(self, name: str, module: ModuleType | None = None) -> bool:
        """:func:`flydeps.code.origin.is_external_module`, once per module and walk."""
        key = name if module is None else (name, id(module))
        found = self.external_modules.get(key)
        if found is None:
            found = self.external_modules[key] = _origin.is_external_module(name, module)
            if module is not None:
                self.keep.append(module)  # the id stays this module's for the walk
        return found

    # -- dispatch --------------------------------------------------------------------
    def visit(self, obj: object, owner: type | None, hint: str) -> str:
        # Code is one node wherever it is reached; a data value is a node per name that
        # holds it (BLOCK_M = 64 and BLOCK_N = 64 share the int object, not the node).
        t = type(obj)
        if t is FunctionType or issubclass(t, _CODE_TYPES) or callable(obj):
            key: tuple[int, ...] | tuple[int, int, str] = (id(obj), id(owner))
        else:
            key = (id(obj), id(owner), hint)
        found = self.memo.get(key)
        if found is not None:
            return found
        self.keep.append(obj)  # memo keys are ids: the objects stay alive for the walk
        if owner is not None:
            self.keep.append(owner)
        nid = self._visit_function(obj, owner, hint) if t is FunctionType else self._visit(obj, owner, hint)  # type: ignore[arg-type]
        self.memo[key] = nid
        return nid

    def _visit(self, obj: object, owner: type | None, hint: str) -> str:
        # Dispatch on type(obj) only (see flydeps.values.objects): isinstance would ask a hostile
        # object's __class__, and attributes are read through the base types' descriptors.
        unwrap = self.unwrapper(obj)
        if unwrap is not None:
            return self._visit_object(obj, hint, list(unwrap(obj)), stateful=False, owner=owner)
        t = type(obj)
        if t is MethodType:
            bound = obj.__self__  # type: ignore[attr-defined]
            if is_a(bound, type) or is_external_type(type(bound)):
                return self.visit(obj.__func__, bound if is_a(bound, type) else type(bound), hint)  # type: ignore[attr-defined]
            return self._visit_bound_method(obj, bound, hint)  # type: ignore[arg-type]
        if is_a(obj, (staticmethod, classmethod)):
            base = staticmethod if is_a(obj, staticmethod) else classmethod
            return self.visit(base.__dict__["__func__"].__get__(obj), owner, hint)
        if is_a(obj, property):
            parts = [(n, f) for n in ("fget", "fset", "fdel") if (f := property.__dict__[n].__get__(obj)) is not None]
            return self._visit_object(obj, hint, parts, stateful=False)
        if is_a(obj, functools.partial):
            nid = self._visit_object(obj, hint, _partial_parts(obj), stateful=False)  # type: ignore[arg-type]
            # its func, args and keywords, re-read on every check: ``.keywords`` edited in place,
            # a ``__setstate__`` (no counter exists for either)
            self.mutables.append((nid, MutableWatch(obj, tuple(_read_partial(obj)), _read_partial)))
            return nid
        if is_a(obj, type):
            return self._visit_class(obj)  # type: ignore[arg-type]
        if is_a(obj, ModuleType):
            return self._visit_module(obj)  # type: ignore[arg-type]
        if t is CodeType:
            return self._visit_code_only(obj, {}, "?", owner, f"?:{qualname_of(obj)}")  # type: ignore[arg-type]
        if callable(obj) and is_c_callable(obj):
            return self.external(f"{c_module(obj)}.{object_qualname(obj)}")
        slot = c_descriptor_name(obj)
        if slot is not None:  # ``self.__class__``, a __slots__ member: structure, named by its class
            return self.external(slot) if is_external_type(_descriptor_class(obj)) else self._visit_slot(slot, hint)
        return self._visit_value(obj, hint)

    def _visit_slot(self, dotted: str, hint: str) -> str:
        self.add(hint, NodeKind.OBJECT, _digest("slot", dotted), detail=f"<slot {dotted}>")
        return hint

    def _visit_bound_method(self, method: MethodType, bound: object, hint: str) -> str:
        """A method bound to a user instance: the function (resolved on the instance's class)
        and the instance it runs on, whose state and class the call reads."""
        func = method.__func__
        if not self.add(hint, NodeKind.OBJECT, _digest("bound-method", object_qualname(func)), detail=describe(method)):
            return hint

        def expand() -> None:
            self.edge(hint, self.visit(func, type(bound), f"{hint}.__func__"), EdgeKind.DECORATES, "__func__")
            self.edge(hint, self.visit(bound, None, f"{hint}.__self__"), EdgeKind.ATTRIBUTE, "__self__")

        self.work.append(expand)
        return hint

    # -- functions -------------------------------------------------------------------
    def _visit_function(self, fn: FunctionType, owner: type | None, hint: str) -> str:
        # The cold path's most frequent step (once per helper): written out, no helper calls
        # for the common case of a module-level user function.
        # Read once: the node's digest and the guard's bindings must describe the same
        # code, defaults and keyword defaults even if another thread swaps them meanwhile.
        attrs = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        code = attrs[0]
        rewrite = _rewrite_of(fn) if _REWRITES else None
        digest_code = rewrite[1] if rewrite is not None and rewrite[0] is code else code
        # Identity comes from where the code was defined: functools.wraps copies
        # __module__/__qualname__ onto wrappers, the globals and the code keep the truth.
        namespace = fn.__globals__
        module = namespace.get("__name__") if type(namespace) is dict else None  # function_module(fn), inline
        if type(module) is not str:
            module = function_module(fn)
        if self.is_external(module):
            wrapped = library_wrapped(fn)
            if wrapped is not MISSING:
                return self._visit_library_wrapper(fn, wrapped, owner, hint)
            inner = library_innermost(fn)
            if inner is not fn:
                return self.external(f"{function_module(inner)}.{inner.__qualname__}")
            return self.external(f"{module}.{fn.__qualname__}")
        qualname = digest_code.co_qualname if _CO_QUALNAME else function_qualname(fn, digest_code)
        defining = defining_class(fn, qualname)
        if owner is None and defining is None:
            base = f"{module}:{qualname}"
        else:
            owner_id = node_id(module_of(owner), type_qualname(owner)) if owner is not None else None
            defining_id = node_id(module_of(defining), type_qualname(defining)) if defining is not None else None
            base = node_id(module, qualname, owner_id if owner_id != defining_id else None)
        holder = self.claims.get(base)
        if holder is None:
            self.claims[base] = (fn, digest_code)
            nid = base
        else:
            nid = base if holder[0] is fn else self._claim(base, fn, digest_code)
        kind = NodeKind.METHOD if defining is not None else NodeKind.FUNCTION
        digest = code_digest(digest_code, positions=True) if self.positions else _analyze(digest_code)[0]
        where = _new(Location, (digest_code.co_filename.rsplit("/", 1)[-1], digest_code.co_firstlineno))
        node = _new(Node, (nid, kind, digest, where, "", _NO_TAGS))
        # A nested function first seen as a code constant of its factory is upgraded here:
        # the live function (its code, closure, defaults) is what runs.
        self.nodes[nid] = node
        if nid not in self.live:
            self.live.add(nid)
            scope = owner if owner is not None else defining
            self.work.append(lambda: self._expand_function(fn, nid, scope, digest_code, attrs))
        return nid

    def _expand_function(
        self, fn: FunctionType, nid: str, owner: type | None, digest_code: CodeType, attrs: tuple
    ) -> None:
        # Walked once per node: these three are never duplicates, recorded directly.
        code, defaults, kwdefaults = attrs
        add = self.bindings.append
        add(_new(Binding, (_ATTR, fn, "__code__", code, nid, nid + ".__code__", True)))
        add(_new(Binding, (_ATTR, fn, "__defaults__", defaults, nid, nid + ".__defaults__", True)))
        add(_new(Binding, (_ATTR, fn, "__kwdefaults__", kwdefaults, nid, nid + ".__kwdefaults__", True)))
        if defaults is not None:
            defaults = sequence_items(defaults) if is_a(defaults, tuple) else []
            names = code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount]
            for name, value in zip(names, defaults):
                self.edge(nid, self.visit(value, None, f"{nid}#default.{name}"), EdgeKind.DEFAULT, name)
        for name, value in dict_items(kwdefaults) if kwdefaults is not None and is_a(kwdefaults, dict) else ():
            self.edge(nid, self.visit(value, None, f"{nid}#default.{name}"), EdgeKind.DEFAULT, _key_label(name))
        if code.co_freevars:
            for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
                self._expand_cell(nid, name, cell)
            self._resolve_free_chains(code, nid, fn.__closure__ or ())
        # FunctionType's generic getattr reads the instance dict at C level (no user code) and,
        # unlike fn.__dict__, does not create an empty dict on a function that has none.
        wrapped = getattr(fn, "__wrapped__", MISSING)
        if wrapped is not MISSING:
            self.edge(nid, self.visit(wrapped, owner, f"{nid}#wrapped"), EdgeKind.DECORATES, "__wrapped__")
        # Annotations are evaluated by the defining code, not the function's own: a kernel whose
        # argument turns from fx.Int32 into fx.Constexpr[int] has the same bytecode.
        # Digested as a value (classes by name); the types named are not code the function
        # calls. Not watched for in-place edits: nobody mutates __annotations__, and a watch
        # would put a per-call check on every annotated kernel (and keep it off the C path).
        annotations = fn.__annotations__
        if annotations if type(annotations) is dict else is_a(annotations, dict) and dict.__len__(annotations):
            hint = f"{nid}#annotations"
            self.add(hint, NodeKind.GLOBAL, self.snapshot(annotations, hint).digest, detail="<annotations>")
            self.edge(nid, hint, EdgeKind.ANNOTATION, "__annotations__")
        # A rewrite (FlyDSL's AST transform) is walked for what it references, its nested
        # functions inline: their names are generated (``__then_3``: a per-process counter)
        # and their content is derived from digest_code, which is what the node digests.
        self._walk_code(code, nid, fn.__globals__, owner, inline_nested=code is not digest_code)
        if digest_code is not code:
            self._walk_code(digest_code, nid, fn.__globals__, owner)

    def _visit_library_wrapper(self, fn: FunctionType, wrapped: object, owner: type | None, hint: str) -> str:
        """A library wrapper (``functools.wraps``-style, e.g. FlyDSL's ``dsl_loc_tracing``)
        around a user function: the name resolves to the user function's node, which is
        walked (code, defaults, closure, callees); the wrapper stays a library leaf,
        reached from it by a ``@<wrapper>`` edge. The wrapper's ``__wrapped__`` and the
        closure cells that hold the wrapped function are bound, so rebinding them is a
        change. Its other cells are the library's own state (a cache, counters) and are
        part of the leaf."""
        nid = self.visit(wrapped, owner, hint)
        code = fn.__code__  # 3.10 has no co_qualname: the wrapper's own code name then
        leaf = f"{function_module(fn)}.{getattr(code, 'co_qualname', f'<wrapper {code.co_name}>')}"
        self.edge(nid, self.external(leaf), EdgeKind.DECORATES, f"@{leaf}")
        inner = dict.get(fn.__dict__, "__wrapped__", MISSING)
        self.bind(BindingKind.DICT, fn.__dict__, "__wrapped__", inner, nid, f"{nid}.<wrapper>.__wrapped__")
        if inner is not MISSING and inner is not wrapped:  # a stack of library wrappers
            self.visit(inner, owner, f"{nid}@wrapper")
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if value is inner or value is wrapped:
                self.bind(BindingKind.CELL, cell, "cell_contents", value, nid, f"{nid}.<wrapper closure {name}>")
        self._wrapper_tables(fn, nid)
        return nid

    def _wrapper_tables(self, fn: FunctionType, nid: str) -> None:
        """A library wrapper's attributes that are tables of user code (``singledispatch``'s
        ``registry``, a plugin list): the user state the library object carries, walked and
        watched as data (a ``register`` after the first build is a change of the table)."""
        for key, value in dict_items(fn.__dict__):
            if type(key) is not str or key.startswith("__"):
                continue
            table = _proxied_dict(value) if type(value) is MappingProxyType else value
            if _is_table(table) and any(is_code(item) for item in _table_items(table)):
                hint = f"{nid}.<wrapper>.{key}"
                # a registered implementation is code: another table is another build, not drift
                self.edge(nid, self._visit_value(table, hint, NodeKind.OBJECT), EdgeKind.ATTRIBUTE, f"<wrapper>.{key}")

    def _expand_cell(self, nid: str, name: str, cell: object) -> None:
        try:
            value = cell.cell_contents  # type: ignore[attr-defined]
        except ValueError:
            self.bind(BindingKind.CELL, cell, "cell_contents", MISSING, nid, f"{nid}.<closure {name}>")
            self.edge(nid, self.unresolved(nid, name, "closure cell is empty"), EdgeKind.CLOSURE, name)
            return
        self.bind(BindingKind.CELL, cell, "cell_contents", value, nid, f"{nid}.<closure {name}>")
        self.edge(nid, self.visit(value, None, f"{nid}#closure.{name}"), EdgeKind.CLOSURE, name)

    def _visit_code_only(self, code: CodeType, globals_: dict, module: str, owner: type | None, parent: str) -> str:
        if hasattr(code, "co_qualname"):
            qualname = code.co_qualname
        else:  # 3.10: a nested code object knows only its own name
            qualname = f"{parent.partition(':')[2].partition('@')[0]}.<locals>.{code.co_name}"
        owner_suffix = parent.partition("@")[2]  # a function nested in a method keeps its owner
        nid = f"{node_id(module, qualname)}@{owner_suffix}" if owner_suffix else node_id(module, qualname)
        nid = self._claim(nid, code, code)
        if self.add(nid, NodeKind.FUNCTION, code_digest(code, positions=self.positions), location=location(code)):
            self.work.append(lambda: self._walk_code(code, nid, globals_, owner))
        return nid

    def _walk_code(
        self, code: CodeType, nid: str, globals_: dict, owner: type | None, *, inline_nested: bool = False
    ) -> None:
        key = (nid, id(code))
        if key in self.walked:
            return
        self.walked.add(key)
        self.keep.append(code)
        self_name = code.co_varnames[0] if code.co_argcount and code.co_varnames[0] in ("self", "cls") else None
        nested = [c for c in code.co_consts if type(c) is CodeType]
        refs = code_refs(code) if nested else _analyze(code)[1]  # (no nested code: its own refs)
        imports = False
        for ref in refs:
            scope = ref.scope
            if scope == "global":
                self._resolve_global(ref, nid, globals_)
            elif ref.attrs and (
                (scope == "local" and ref.name == self_name)
                or (scope == "free" and ref.name in ("self", "cls") and owner is not None)
            ):
                self._resolve_self(ref, nid, owner)
            elif scope == "import":
                self._resolve_import(ref, nid, globals_)
                imports = True
        names = code.co_names  # the modules its imports bind to locals; import_module, sys.modules, __import__
        if "getattr" in names:  # getattr(mod, "name"): the chain mod.name, read by a constant name
            for ref in getattr_reads(code):
                self._resolve_global(ref, nid, globals_)
        if imports or "import_module" in names or "modules" in names or "__import__" in names:
            reads = import_reads(code)
            if reads:
                self._resolve_import_reads(reads, refs, nid, globals_)
        nested_functions = [c for c in nested if is_function_code(c)]
        if not nested_functions:
            return
        module = dict.get(globals_, "__name__", "?") if is_a(globals_, dict) else "?"
        module = module if type(module) is str else "?"
        for function in nested_functions:
            if inline_nested:
                self._walk_code(function, nid, globals_, owner, inline_nested=True)
            else:
                child = self._visit_code_only(function, globals_, module, owner, nid)
                self.edge(nid, child, EdgeKind.NESTED, function.co_name)

    # -- classes, modules, objects, values -------------------------------------------
    def _visit_class(self, cls: type) -> str:
        qualname = type_qualname(cls)
        if is_external_type(cls):
            return self.external(f"{type_module(cls)}.{qualname}")
        nid = node_id(type_module(cls), qualname)
        namespace = class_dict(cls)
        # One copy serves the digest and the bindings (another thread may set attributes).
        items = [(k, v) for k, v in dict_items(namespace) if type(k) is str and k not in _CLASS_NOISE]
        data = {k: v for k, v in items if not (is_member_code(v) or self.unwrapper(v) is not None)}
        snap = self.snapshot(data, nid)
        if self.add(nid, NodeKind.CLASS, _digest("class", qualname, snap.digest)):
            if not _is_enum(cls):  # a class-level table edited in place (an enum's are its own)
                self._watch(nid, snap, own=data)  # (the copy of the namespace: the bindings watch that)
            self.work.append(lambda: self._expand_class(cls, nid, namespace, items))
        return nid

    def _expand_class(self, cls: type, nid: str, namespace: dict, items: list) -> None:
        for base in type_bases(cls):
            if base is not object:
                self.edge(nid, self.visit(base, None, nid), EdgeKind.CALLS, "base")
        qualname = type_qualname(cls)
        for key, value in items:
            self.bind(BindingKind.DICT, namespace, key, value, nid, f"{qualname}.{key}")
            if is_member_code(value) or self.unwrapper(value) is not None:  # a jit/kernel method: its code
                self.edge(nid, self.visit(value, cls, f"{nid}.{key}"), EdgeKind.METHOD, key)

    def _visit_module(self, module: ModuleType) -> str:
        name = module_name(module)
        if self.is_external(name, module):
            return self.external(name)
        nid = f"{name}:"
        self.add(nid, NodeKind.MODULE, _digest("module", name))
        return nid

    def _visit_object(
        self, obj: object, hint: str, parts: Sequence[tuple[str, object]], *, stateful: bool, owner: type | None = None
    ) -> str:
        """An object walked through ``parts``. ``stateful``: its own state is data too (user
        classes); wrappers (library types, registered unwrappers, partials) digest by type
        and name only, so their internal caches filling up is not a change."""
        if owner is not None:  # a wrapper reached through self.x: what it wraps resolves on owner
            hint = f"{hint}@{node_id(module_of(owner), type_qualname(owner))}"
        if stateful:
            snap = self.snapshot(obj, hint)
            digest, detail = snap.digest, snap.summary
        else:
            snap = None
            digest, detail = _digest("wrapper", object_qualname(type(obj)), safe_name(obj)), describe(obj)
        settings = tuple((label, value) for label, value in parts if label.startswith("="))
        parts = [(label, value) for label, value in parts if not label.startswith("=")]
        if not self.add(hint, NodeKind.OBJECT, digest, detail=detail):
            return hint
        if snap is not None:
            self._watch(hint, snap)

        def expand() -> None:
            self.edge(hint, self.visit(type(obj), None, hint), EdgeKind.CALLS, "type")
            if settings:  # its own node: a wrapper's id may be shared with the function it wraps
                shown = ", ".join(f"{label[1:].lstrip('.')}={describe(value)}" for label, value in settings)
                self.add(f"{hint}#settings", NodeKind.OBJECT, self.snapshot(settings, hint).digest, detail=shown)
                self.edge(hint, f"{hint}#settings", EdgeKind.ATTRIBUTE, "settings")
                self._bind_settings(obj, settings, f"{hint}#settings")
            for label, value in parts:
                kind = EdgeKind.DECORATES if label in ("func", "__wrapped__") else EdgeKind.ATTRIBUTE
                self.edge(hint, self.visit(value, owner, f"{hint}.{label}"), kind, label)

        self.work.append(expand)
        return hint

    def _bind_settings(self, obj: object, settings: tuple[tuple[str, object], ...], node: str) -> None:
        """``=.attr`` settings are the wrapper's own instance attributes: guard each binding
        in the instance dict (a rebinding, e.g. ``kernel._name = ...``, is a code change of
        the wrapper, as editing its decorator argument is)."""
        namespace = instance_dict(obj)
        if namespace is None:
            return
        for label, _value in settings:
            if label.startswith("=."):
                attr = label[2:]
                current = namespace.get(attr, MISSING)
                self.bindings.append(Binding(BindingKind.DICT, namespace, attr, current, node, f"{node}.{attr}", True))

    def _visit_value(self, value: object, hint: str, kind: NodeKind | None = None) -> str:
        t = type(value)
        if t not in _CONTAINERS:  # an identity lookup: no metaclass __eq__/__hash__
            members = code_members(value)
            if is_external_type(t):
                if members:  # a library wrapper around user code (e.g. a JIT object)
                    if t is _memoreads.LRU_WRAPPER:  # a memoized reader: its memo is read (issue 35.4)
                        _memoreads.track(value)
                    return self._visit_object(value, hint, members, stateful=False)
                name = safe_name(value) if callable(value) else ""
                if name:  # a library callable instance (numpy ufunc, torch op): a leaf
                    return self.external(f"{c_module(value)}.{name}")
            elif callable(value) or members:
                return self._visit_object(value, hint, members, stateful=True)
        snap = self.snapshot(value, hint)
        # A value read per thread or context (a ContextVar, a threading.local) keys the build:
        # another value is another build, never data drift of this one.
        if kind is None:
            kind = NodeKind.OBJECT if _KEYED.along_mro(t) else NodeKind.GLOBAL
        if not self.add(hint, kind, snap.digest, detail=snap.summary):
            return hint
        self._watch(hint, snap)
        if t in _CONTAINERS:
            self.work.append(lambda: self._expand_container(value, hint))
        return hint

    def snapshot(self, value: object, nid: str) -> Snapshot:
        """:func:`flydeps.values.snapshot.snapshot` of a value ``nid`` digests, noting an identity in it."""
        snap = snapshot(value)
        if snap.identified:
            self.identified.append(nid)
        if snap.types:  # an instance depends on its class (deferred: classes hold instances too)
            self.work.append(lambda: self._type_edges(nid, snap.types))
        for obj in snap.instances:  # and stays of it (a __class__ assignment is audited)
            self.bind(BindingKind.TYPE, obj, "__class__", type(obj), nid, f"{nid}.__class__")
        return snap

    def _type_edges(self, nid: str, types: tuple[type, ...]) -> None:
        for cls in types:
            # one edge per class, named by it: the edges of a node are matched by label
            self.edge(
                nid, self.visit(cls, None, nid), EdgeKind.CALLS, f"<type {type_module(cls)}.{type_qualname(cls)}>"
            )

    def _watch(self, nid: str, snap: object, own: object = None) -> None:
        if snap.oversized:  # type: ignore[attr-defined]
            if nid not in _WARNED_OVERSIZED:
                _WARNED_OVERSIZED.add(nid)
                log.warning(
                    "%s holds more than %d elements (or over 1 MiB of data): it is fingerprinted by identity, "
                    "size or a digest of its bytes; rebinding it is detected, in-place changes are not "
                    "(raise FLYDEPS_SNAPSHOT_LIMIT to include it)",
                    nid,
                    SNAPSHOT_LIMIT,
                )
        self.mutables.extend((nid, m) for m in snap.mutables if m.container is not own)  # type: ignore[attr-defined]

    def _expand_container(self, value: Any, hint: str) -> None:
        items = dict_items(value) if type(value) is dict else enumerate(sequence_items(value))
        for n, (key, item) in enumerate(items):
            if n >= SNAPSHOT_LIMIT:
                break
            if is_code(item) or self.unwrapper(item) is not None:
                label = f"[{key!r}]" if type(key) is int or type(key) is str else f"[{n}]"
                self.edge(hint, self.visit(item, None, f"{hint}{label}"), EdgeKind.ATTRIBUTE, label)


# Class-namespace entries that restate structure or position (3.13 adds __firstlineno__,
# a line number, and __static_attributes__, derived from the methods' code; @dataclass its
# fields, parameters and match arguments).
_CLASS_NOISE = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__firstlineno__",
        "__static_attributes__",
        # what @dataclass derives from the class body (the defaults stay class attributes)
        "__dataclass_fields__",
        "__dataclass_params__",
        "__match_args__",
    }
)
_CONTAINERS = TypeTable((t, True) for t in (tuple, list, dict, set, frozenset))
_KEYED = TypeTable((t, True) for t in (contextvars.ContextVar, _thread._local))


def _is_enum(cls: type) -> bool:
    return any(klass is enum.Enum for klass in type_mro(cls))


def _descriptor_class(descriptor: object) -> type:
    """The class a C descriptor belongs to (its ``__objclass__``, read by the descriptor type)."""
    return type(descriptor).__dict__["__objclass__"].__get__(descriptor)  # type: ignore[no-any-return]


def _is_table(value: object) -> bool:
    """A builtin container exactly (no subclass: its contents are what it holds)."""
    return type(value) in _CONTAINERS


def _table_items(table: Any) -> list:
    return [v for _k, v in dict_items(table)] if type(table) is dict else sequence_items(table)


def _proxied_dict(proxy: MappingProxyType) -> object:
    """The dict behind a mappingproxy (its only referent), or the proxy when it is not one."""
    for ref in gc.get_referents(proxy):
        if type(ref) is dict:
            return ref
    return proxy


_PARTIAL_FIELDS = tuple(functools.partial.__dict__[n] for n in ("func", "args", "keywords"))


def _read_partial(obj: Any) -> list:
    """A partial's state for a watch: its func, args, keywords, then the keywords' items."""
    func, args, keywords = (field.__get__(obj) for field in _PARTIAL_FIELDS)
    out = [func, args, keywords]
    if is_a(keywords, dict):
        out += [x for item in dict.items(keywords) for x in item]
    return out


def _partial_parts(obj: functools.partial) -> list[tuple[str, object]]:
    """A partial's function, arguments and keywords through the base type's own member
    descriptors (a subclass's properties or ``__getattribute__`` never run)."""
    func, args, keywords = (field.__get__(obj) for field in _PARTIAL_FIELDS)
    parts: list[tuple[str, object]] = [("func", func)]
    parts += [(f"arg{i}", a) for i, a in enumerate(sequence_items(args) if is_a(args, tuple) else ())]
    parts += [(_key_label(k), v) for k, v in (dict_items(keywords) if is_a(keywords, dict) else ())]
    return parts


def _key_label(key: object) -> str:
    return key if type(key) is str else "<non-str key>"  # type: ignore[return-value]
