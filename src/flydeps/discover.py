"""Runtime discovery: live objects and their bytecode -> :class:`~flydeps.graph.DepGraph`.

Contract: reads live objects (functions, code, closure cells, defaults, module and class
namespaces) and records, next to the graph, every :class:`~flydeps._bindings.Binding`
the graph was built from so a guard can re-check them. It never calls user code: names
are resolved through real namespace dicts, values are snapshotted structurally
(:mod:`flydeps._values`). Code outside the user's roots (stdlib, site-packages, flydeps
itself) is a leaf ``external:`` node identified by ``distribution==version``. What
cannot be resolved becomes an ``unresolved:`` node; nothing is dropped. The walk is a
work list, so deep helper chains and cycles need no recursion.
"""

from __future__ import annotations

import functools
import logging
import sys
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

from blake3 import blake3

from . import _origin
from ._bindings import MISSING, Binding, BindingKind, class_dict, is_code, lookup_mro
from ._builder import GraphBuilder
from ._bytecode import NameRef, code_digest, code_refs, is_function_code, nested_codes, qualname_of
from ._objects import (
    c_module,
    class_id,
    code_members,
    defining_class,
    function_qualname,
    is_c_callable,
    is_external_type,
    is_member_code,
    location,
    module_of,
    object_qualname,
    safe_name,
)
from ._values import SNAPSHOT_LIMIT, MutableWatch, describe, snapshot
from .graph import DepGraph, EdgeKind, Node, NodeKind, node_id

__all__ = ["Discovery", "discover", "note_code_rewrite", "register_unwrapper"]

log = logging.getLogger("flydeps")

Unwrapper = Callable[[object], Iterable[tuple[str, object]]]
_UNWRAPPERS: dict[type, Unwrapper] = {}
# func -> (rewritten code now installed, original code the user wrote)
_REWRITES: "weakref.WeakKeyDictionary[FunctionType, tuple[CodeType, CodeType]]" = weakref.WeakKeyDictionary()
_WARNED_OVERSIZED: set[str] = set()
_FUNC_ATTRS = ("__code__", "__defaults__", "__kwdefaults__")


def register_unwrapper(type_: type, fn: Unwrapper) -> None:
    """Teach discovery to see through instances of ``type_`` (and subclasses).

    ``fn(obj)`` yields ``(label, value)`` pairs to walk, e.g. a JIT wrapper yields
    ``("func", obj.func)``. Registered unwrappers replace the generic attribute walk."""
    if not isinstance(type_, type) or not callable(fn):
        raise TypeError(f"register_unwrapper(type_, fn) needs a class and a callable, got {type_!r}, {fn!r}")
    _UNWRAPPERS[type_] = fn


def note_code_rewrite(func: FunctionType, original_code: CodeType) -> None:
    """Record that ``func.__code__`` is a rewrite (e.g. an AST transform) of ``original_code``.

    The function then digests as the original (what the user wrote) while the rewritten
    code's references are walked too; swapping the original for the rewrite is not a
    user change."""
    if not isinstance(func, FunctionType) or not isinstance(original_code, CodeType):
        raise TypeError("note_code_rewrite(func, original_code) needs a Python function and a code object")
    _REWRITES[func] = (func.__code__, original_code)


@dataclass(frozen=True)
class Discovery:
    """A graph plus the live bindings and mutable values it was built from."""

    graph: DepGraph
    bindings: tuple[Binding, ...]
    mutables: tuple[tuple[str, MutableWatch], ...]  # (node id, watch)


def discover(obj: object, *, owner: type | None = None) -> DepGraph:
    """The dependency graph of ``obj`` (function, method, class, callable object, ...).

    ``owner`` is the class through which methods are looked up: ``self.helper`` inside
    ``Base.run`` resolves on ``owner``'s MRO, so ``owner=Sub`` sees Sub's override.
    """
    return discover_roots([(obj, owner, "root")]).graph


def discover_roots(roots: Sequence[tuple[object, type | None, str]]) -> Discovery:
    """Discover several roots at once: ``(object, owner, hint id for non-code roots)``."""
    walker = _Walker()
    ids = tuple(dict.fromkeys(walker.visit(obj, owner, hint) for obj, owner, hint in roots))
    walker.run()
    return Discovery(walker.graph(ids), tuple(walker.bindings), tuple(walker.mutables))


def _digest(*parts: str) -> str:
    return blake3("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


class _Walker(GraphBuilder):
    """Builds nodes immediately and expands them from a work list."""

    def __init__(self) -> None:
        super().__init__()
        self.bindings: list[Binding] = []
        self.mutables: list[tuple[str, MutableWatch]] = []
        self.memo: dict[tuple[int, ...] | tuple[int, int, str], str] = {}
        self.keep: list[object] = []  # memo keys are id()s: keep their objects alive
        self.work: deque[Callable[[], None]] = deque()
        self.live: set[str] = set()  # function nodes whose live object was expanded
        self.claims: dict[str, tuple[object, CodeType]] = {}  # function node id -> (function or code, code)
        self.walked: set[tuple[str, int]] = set()  # (node, id(code)) already walked

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
            if holder[1] is code and (isinstance(holder[0], CodeType) or isinstance(obj, CodeType)):
                if isinstance(holder[0], CodeType):  # the live function takes over its placeholder
                    self.claims[nid] = (obj, code)
                return nid
            n += 1

    def bind(self, kind: BindingKind, container: object, key: str, expected: object, node: str, label: str) -> None:
        code = kind is BindingKind.ATTR or is_code(expected)
        self.bindings.append(Binding(kind, container, key, expected, node, label, code))

    # -- dispatch --------------------------------------------------------------------
    def visit(self, obj: object, owner: type | None, hint: str) -> str:
        # Code is one node wherever it is reached; a data value is a node per name that
        # holds it (BLOCK_M = 64 and BLOCK_N = 64 share the int object, not the node).
        code = is_code(obj) or callable(obj)
        key = (id(obj), id(owner)) if code else (id(obj), id(owner), hint)
        found = self.memo.get(key)
        if found is not None:
            return found
        self.keep.append((obj, owner))
        nid = self._visit(obj, owner, hint)
        self.memo[key] = nid
        return nid

    def _visit(self, obj: object, owner: type | None, hint: str) -> str:
        unwrap = _find_unwrapper(type(obj))
        if unwrap is not None:
            return self._visit_object(obj, hint, list(unwrap(obj)), stateful=False, owner=owner)
        if isinstance(obj, FunctionType):
            return self._visit_function(obj, owner)
        if isinstance(obj, MethodType):
            bound = obj.__self__
            return self.visit(obj.__func__, bound if isinstance(bound, type) else type(bound), hint)
        if isinstance(obj, (staticmethod, classmethod)):
            return self.visit(obj.__func__, owner, hint)
        if isinstance(obj, property):
            parts = [(n, f) for n, f in (("fget", obj.fget), ("fset", obj.fset), ("fdel", obj.fdel)) if f]
            return self._visit_object(obj, hint, parts, stateful=False)
        if isinstance(obj, functools.partial):
            parts = [("func", obj.func), *((f"arg{i}", a) for i, a in enumerate(obj.args)), *obj.keywords.items()]
            return self._visit_object(obj, hint, parts, stateful=False)
        if isinstance(obj, type):
            return self._visit_class(obj)
        if isinstance(obj, ModuleType):
            return self._visit_module(obj)
        if isinstance(obj, CodeType):
            return self._visit_code_only(obj, {}, "?", owner, f"?:{qualname_of(obj)}")
        if callable(obj) and is_c_callable(obj):
            return self.external(f"{c_module(obj)}.{object_qualname(obj)}")
        return self._visit_value(obj, hint)

    # -- functions -------------------------------------------------------------------
    def _visit_function(self, fn: FunctionType, owner: type | None) -> str:
        code = fn.__code__
        rewrite = _REWRITES.get(fn)
        digest_code = rewrite[1] if rewrite is not None and rewrite[0] is code else code
        # Identity comes from where the code was defined: functools.wraps copies
        # __module__/__qualname__ onto wrappers, the globals and the code keep the truth.
        module = fn.__globals__.get("__name__", None) if isinstance(fn.__globals__, dict) else None
        module = module if isinstance(module, str) else module_of(fn)
        if _origin.is_external_module(module):
            return self.external(f"{module}.{fn.__qualname__}")
        qualname = function_qualname(fn, digest_code)
        defining = defining_class(fn, qualname)
        owner_id = node_id(module_of(owner), owner.__qualname__) if owner is not None else None
        defining_id = node_id(module_of(defining), defining.__qualname__) if defining is not None else None
        nid = self._claim(node_id(module, qualname, owner_id if owner_id != defining_id else None), fn, digest_code)
        kind = NodeKind.METHOD if defining is not None else NodeKind.FUNCTION
        node = Node(nid, kind, code_digest(digest_code), location=location(digest_code))
        # A nested function first seen as a code constant of its factory is upgraded here:
        # the live function (its code, closure, defaults) is what runs.
        self.nodes[nid] = node
        if nid not in self.live:
            self.live.add(nid)
            self.work.append(lambda: self._expand_function(fn, nid, owner or defining, digest_code))
        return nid

    def _expand_function(self, fn: FunctionType, nid: str, owner: type | None, digest_code: CodeType) -> None:
        for attr in _FUNC_ATTRS:
            self.bind(BindingKind.ATTR, fn, attr, getattr(fn, attr), nid, f"{nid}.{attr}")
        code = fn.__code__
        names = code.co_varnames[code.co_argcount - len(fn.__defaults__ or ()) : code.co_argcount]
        for name, value in zip(names, fn.__defaults__ or ()):
            self.edge(nid, self.visit(value, None, f"{nid}#default.{name}"), EdgeKind.DEFAULT, name)
        for name, value in (fn.__kwdefaults__ or {}).items():
            self.edge(nid, self.visit(value, None, f"{nid}#default.{name}"), EdgeKind.DEFAULT, name)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            self._expand_cell(nid, name, cell)
        wrapped = fn.__dict__.get("__wrapped__", MISSING)
        if wrapped is not MISSING:
            self.edge(nid, self.visit(wrapped, owner, f"{nid}#wrapped"), EdgeKind.DECORATES, "__wrapped__")
        # Annotations are evaluated by the defining code, not the function's own: a kernel whose
        # argument turns from fx.Int32 into fx.Constexpr[int] has the same bytecode.
        # Digested as a value (classes by name); the types named are not code the function
        # calls. Not watched for in-place edits: nobody mutates __annotations__, and a watch
        # would put a per-call check on every annotated kernel (and keep it off the C path).
        annotations = fn.__annotations__
        if annotations:
            hint = f"{nid}#annotations"
            self.add(hint, NodeKind.GLOBAL, snapshot(annotations).digest, detail="<annotations>")
            self.edge(nid, hint, EdgeKind.ANNOTATION, "__annotations__")
        self._walk_code(code, nid, fn.__globals__, owner)
        self._walk_code(digest_code, nid, fn.__globals__, owner)

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
        if self.add(nid, NodeKind.FUNCTION, code_digest(code), location=location(code)):
            self.work.append(lambda: self._walk_code(code, nid, globals_, owner))
        return nid

    def _walk_code(self, code: CodeType, nid: str, globals_: dict, owner: type | None) -> None:
        if (nid, id(code)) in self.walked:
            return
        self.walked.add((nid, id(code)))
        self.keep.append(code)
        self_name = code.co_varnames[0] if code.co_argcount and code.co_varnames[0] in ("self", "cls") else None
        for ref in code_refs(code):
            if ref.scope == "global":
                self._resolve_global(ref, nid, globals_)
            elif ref.attrs and (
                (ref.scope == "local" and ref.name == self_name)
                or (ref.scope == "free" and ref.name in ("self", "cls") and owner is not None)
            ):
                self._resolve_self(ref, nid, owner)
            elif ref.scope == "import":
                self._resolve_import(ref, nid, globals_)
        module = globals_.get("__name__", "?") if isinstance(globals_, dict) else "?"
        for nested in nested_codes(code):
            if is_function_code(nested):
                child = self._visit_code_only(nested, globals_, module, owner, nid)
                self.edge(nid, child, EdgeKind.NESTED, nested.co_name)

    # -- name resolution -------------------------------------------------------------
    def _resolve_global(self, ref: NameRef, nid: str, globals_: dict) -> None:
        name = ref.name
        value = globals_.get(name, MISSING)
        module = globals_.get("__name__", "?")
        self.bind(BindingKind.DICT, globals_, name, value, nid, f"{module}.{name}")
        if name in _MODULE_PLUMBING and value is not MISSING:
            target = f"{module}:{name}"
            digest = _digest("module-plumbing", str(module), name)
            self.add(target, NodeKind.GLOBAL, digest, detail=f"<{name} of {module}>")
            self.edge(nid, target, EdgeKind.READS, name)
            return
        home, key = globals_, name
        if value is MISSING:
            builtins = globals_.get("__builtins__", {})
            builtins = builtins.__dict__ if isinstance(builtins, ModuleType) else builtins
            value = builtins.get(name, MISSING) if isinstance(builtins, dict) else MISSING
            if value is MISSING:
                self.edge(nid, self.unresolved(nid, name, "name is not defined"), EdgeKind.CALLS, name)
                return
            self.bind(BindingKind.DICT, builtins, name, value, nid, f"builtins.{name}")
            home = builtins
        self._follow_chain(nid, value, home, key, ref.attrs, name)

    def _follow_chain(self, nid: str, value: object, home: dict, key: str, attrs: tuple[str, ...], label: str) -> None:
        owner: type | None = None
        for i, attr in enumerate(attrs):
            if isinstance(value, ModuleType):
                if _origin.is_external_module(value.__name__, value):
                    dotted = ".".join((value.__name__, *attrs[i:]))
                    self.edge(nid, self.external(dotted), EdgeKind.CALLS, ".".join((label, *attrs[i:])))
                    return
                home, key = value.__dict__, attr
                nxt = home.get(attr, MISSING)
                self.bind(BindingKind.DICT, home, attr, nxt, nid, f"{value.__name__}.{attr}")
            elif isinstance(value, type) and not is_external_type(value):
                defining, nxt, looked = lookup_mro(value, attr)
                for namespace, seen in looked:
                    self.bind(BindingKind.DICT, namespace, attr, seen, nid, f"{object_qualname(value)}.{attr}")
                home, key, owner = (class_dict(defining) if defining else home), attr, value
            else:
                break  # attribute of a value: the value's snapshot covers it
            label = f"{label}.{attr}"
            if nxt is MISSING:
                self.edge(nid, self.unresolved(nid, label, "attribute not found"), EdgeKind.CALLS, label)
                return
            value = nxt
        hint = f"{home.get('__name__', class_id(home))}:{key}" if isinstance(home, dict) else f"{nid}#{label}"
        target = self.visit(value, owner, hint)
        calls = is_code(value) or target.startswith("external:")
        self.edge(nid, target, EdgeKind.CALLS if calls else EdgeKind.READS, label)

    def _resolve_self(self, ref: NameRef, nid: str, owner: type | None) -> None:
        attr = ref.attrs[0]
        label = f"{ref.name}.{attr}"
        if owner is None:
            self.edge(nid, self.unresolved(nid, label, "no owner class to resolve self on"), EdgeKind.METHOD, label)
            return
        defining, value, looked = lookup_mro(owner, attr)
        for namespace, seen in looked:
            self.bind(BindingKind.DICT, namespace, attr, seen, nid, f"{object_qualname(owner)}.{attr}")
        if defining is None:
            self.edge(nid, self.unresolved(nid, label, "instance attribute, not on the class"), EdgeKind.METHOD, label)
            return
        hint = node_id(module_of(defining), f"{defining.__qualname__}.{attr}")
        self.edge(nid, self.visit(value, owner, hint), EdgeKind.METHOD, label)

    def _resolve_import(self, ref: NameRef, nid: str, globals_: dict) -> None:
        name = ref.name
        if ref.level:  # ``from .mem import x`` inside a function: relative to the package
            package = globals_.get("__package__") or globals_.get("__name__", "")
            parts = str(package).split(".")
            base = ".".join(parts[: len(parts) - ref.level + 1]) if ref.level <= len(parts) else ""
            name = f"{base}.{name}" if base and name else base or name
        module = sys.modules.get(name)
        if module is None:
            self.edge(nid, self.unresolved(nid, ref.name, "module not imported"), EdgeKind.IMPORTS, ref.name)
            return
        self._follow_chain(nid, module, {}, name, ref.attrs, ref.name)

    # -- classes, modules, objects, values -------------------------------------------
    def _visit_class(self, cls: type) -> str:
        if is_external_type(cls):
            return self.external(f"{module_of(cls)}.{cls.__qualname__}")
        nid = node_id(module_of(cls), cls.__qualname__)
        namespace = class_dict(cls)
        data = {k: v for k, v in namespace.items() if not is_member_code(v) and k not in _CLASS_NOISE}
        digest = _digest("class", cls.__qualname__, snapshot(data).digest)
        if self.add(nid, NodeKind.CLASS, digest):
            self.work.append(lambda: self._expand_class(cls, nid, namespace))
        return nid

    def _expand_class(self, cls: type, nid: str, namespace: dict) -> None:
        for base in cls.__bases__:
            if base is not object:
                self.edge(nid, self.visit(base, None, nid), EdgeKind.CALLS, "base")
        for key, value in namespace.items():
            if key in _CLASS_NOISE:
                continue
            self.bind(BindingKind.DICT, namespace, key, value, nid, f"{cls.__qualname__}.{key}")
            if is_member_code(value):
                self.edge(nid, self.visit(value, cls, f"{nid}.{key}"), EdgeKind.METHOD, key)

    def _visit_module(self, module: ModuleType) -> str:
        if _origin.is_external_module(module.__name__, module):
            return self.external(module.__name__)
        nid = f"{module.__name__}:"
        self.add(nid, NodeKind.MODULE, _digest("module", module.__name__))
        return nid

    def _visit_object(
        self, obj: object, hint: str, parts: Sequence[tuple[str, object]], *, stateful: bool, owner: type | None = None
    ) -> str:
        """An object walked through ``parts``. ``stateful``: its own state is data too (user
        classes); wrappers (library types, registered unwrappers, partials) digest by type
        and name only, so their internal caches filling up is not a change."""
        if owner is not None:  # a wrapper reached through self.x: what it wraps resolves on owner
            hint = f"{hint}@{node_id(module_of(owner), owner.__qualname__)}"
        if stateful:
            snap = snapshot(obj)
            digest, detail = snap.digest, snap.summary
        else:
            snap = None
            digest, detail = _digest("wrapper", object_qualname(type(obj)), safe_name(obj)), describe(obj)
        if not self.add(hint, NodeKind.OBJECT, digest, detail=detail):
            return hint
        if snap is not None:
            self._watch(hint, snap)

        def expand() -> None:
            self.edge(hint, self.visit(type(obj), None, hint), EdgeKind.CALLS, "type")
            for label, value in parts:
                kind = EdgeKind.DECORATES if label in ("func", "__wrapped__") else EdgeKind.ATTRIBUTE
                self.edge(hint, self.visit(value, owner, f"{hint}.{label}"), kind, label)

        self.work.append(expand)
        return hint

    def _visit_value(self, value: object, hint: str) -> str:
        t = type(value)
        if t not in _CONTAINERS:
            members = code_members(value)
            if is_external_type(t):
                if members:  # a library wrapper around user code (e.g. a JIT object)
                    return self._visit_object(value, hint, members, stateful=False)
                name = safe_name(value) if callable(value) else ""
                if name:  # a library callable instance (numpy ufunc, torch op): a leaf
                    return self.external(f"{c_module(value)}.{name}")
            elif callable(value) or members:
                return self._visit_object(value, hint, members, stateful=True)
        snap = snapshot(value)
        if not self.add(hint, NodeKind.GLOBAL, snap.digest, detail=snap.summary):
            return hint
        self._watch(hint, snap)
        if t in _CONTAINERS:
            self.work.append(lambda: self._expand_container(value, hint))
        return hint

    def _watch(self, nid: str, snap: object) -> None:
        if snap.oversized:  # type: ignore[attr-defined]
            if nid not in _WARNED_OVERSIZED:
                _WARNED_OVERSIZED.add(nid)
                log.warning(
                    "%s holds more than %d elements: it is fingerprinted by type and size only, and only its "
                    "rebinding is detected, not in-place changes (raise FLYDEPS_SNAPSHOT_LIMIT to include it)",
                    nid,
                    SNAPSHOT_LIMIT,
                )
        self.mutables.extend((nid, m) for m in snap.mutables)  # type: ignore[attr-defined]

    def _expand_container(self, value: Any, hint: str) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value)  # type: ignore[attr-defined]
        for n, (key, item) in enumerate(items):
            if n >= SNAPSHOT_LIMIT:
                break
            if is_code(item) or _find_unwrapper(type(item)) is not None:
                label = f"[{key!r}]" if type(key) in (int, str) else f"[{n}]"
                self.edge(hint, self.visit(item, None, f"{hint}{label}"), EdgeKind.ATTRIBUTE, label)


# Class-namespace entries that restate structure or position (3.13 adds __firstlineno__,
# a line number, and __static_attributes__, derived from the methods' code).
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
    }
)
# Module attributes that locate rather than define: keyed by the module they belong to,
# never by the absolute path or loader object they hold.
_MODULE_PLUMBING = frozenset({"__file__", "__cached__", "__path__", "__spec__", "__loader__", "__builtins__"})
_CONTAINERS = (tuple, list, dict, set, frozenset)


def _find_unwrapper(t: type) -> Unwrapper | None:
    if not _UNWRAPPERS:
        return None
    for klass in t.__mro__:
        fn = _UNWRAPPERS.get(klass)
        if fn is not None:
            return fn
    return None
