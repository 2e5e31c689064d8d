"""Name resolution for runtime discovery: what a name read by a code object resolves to.

Contract: given the names a code object reads (:class:`~flydeps.code.bytecode.NameRef`), looks
them up in the function's globals, the builtins, a closure variable holding a module or a
class, a module imported inside the function, or ``self``/``cls``'s class along the MRO,
following attribute chains (``mod.sub.fn``, ``Cls.attr``). An import the code runs (a
statement in its body, ``importlib.import_module`` with a constant name) is a read of
``sys.modules[name]`` (bound as an ``ENTRY``) plus of the module, and the locals it binds
carry their chains on (``import m`` then ``m.VAL``). A module attribute absent from a user
module that defines ``__getattr__`` (PEP 562) resolves to a call of that function plus the
attribute of that name in the package's imported submodules (where the lazy table points;
observed, never evaluated). A chain into a library module that ends at a plain data value
(``torch.__version__``, a flag: atoms and tuples of atoms) is bound and digested by value,
so a monkeypatch is a change, not only an upgrade. Namespaces are read through
their real dicts with ``dict``'s own methods (a dict subclass's overrides never run) and
classes through ``type``'s descriptors: no user code runs. Every namespace entry looked at
is recorded as a binding (present or ``MISSING``) for the guard, and the object found is
handed to the walker's ``visit``. :class:`NameResolver` is the base of discovery's walker,
which provides ``visit`` and ``bind``.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from types import CodeType, FunctionType, ModuleType

from blake3 import blake3

from ..code import origin as _origin
from ..code.bytecode import ImportRead, NameRef, code_refs
from ..code.graphbuild import GraphBuilder
from ..graph import EdgeKind, NodeKind, external_id, node_id
from ..values.bindings import _CODE_TYPES, MISSING, BindingKind, class_dict, dict_items, is_a, lookup_mro
from ..values.objects import (
    class_id,
    describe,
    instance_dict,
    is_external_type,
    module_dict,
    module_name,
    module_of,
    object_qualname,
    type_qualname,
)
from ..values.snapshot import Snapshot

__all__ = ["NameResolver", "parts_digest"]

# Module attributes that locate rather than define: keyed by the module they belong to,
# never by the absolute path or loader object they hold.
_CALLS, _READS = EdgeKind.CALLS, EdgeKind.READS
_MODULE_PLUMBING = frozenset({"__file__", "__cached__", "__path__", "__spec__", "__loader__", "__builtins__"})
_ENTRY = BindingKind.ENTRY
# Library module attributes digested by value (a flag, a version string), by exact type.
_PLAIN_ATOMS = frozenset(map(id, (str, int, float, complex, bool, bytes, type(None))))
_PLAIN_DEPTH = 4


def parts_digest(*parts: str) -> str:
    """Hex blake3 of ``parts`` joined by NUL (node digests of classes, modules, wrappers)."""
    return blake3("\0".join(parts).encode("utf-8", "surrogatepass")).digest().hex()


class NameResolver(GraphBuilder):
    """Resolves the names code reads; the walker subclass provides ``visit`` and ``bind``."""

    def __init__(self) -> None:
        super().__init__()
        # (id(globals), NameRef) -> the edge a global name read resolved to, in this walk
        self.resolved: dict[tuple[int, NameRef], tuple[str, EdgeKind, str]] = {}

    def visit(self, obj: object, owner: type | None, hint: str) -> str:
        raise NotImplementedError  # pragma: no cover - discover._Walker implements it

    def bind(self, kind: BindingKind, container: object, key: str, expected: object, node: str, label: str) -> None:
        raise NotImplementedError  # pragma: no cover - discover._Walker implements it

    def is_external(self, name: str, module: ModuleType | None = None) -> bool:
        raise NotImplementedError  # pragma: no cover - discover._Walker implements it

    def snapshot(self, value: object, nid: str) -> Snapshot:
        raise NotImplementedError  # pragma: no cover - discover._Walker implements it

    def _resolve_global(self, ref: NameRef, nid: str, globals_: dict) -> None:
        # A name read through the same namespace by several functions of a walk (a module
        # constant read by each of its helpers) resolves once: the others get the same edge.
        # Its bindings are recorded for the first reader only, as the guard keeps them anyway
        # (one check per namespace entry, reported as read by the first reader).
        memo_key = (id(globals_), ref)
        edge = self.resolved.get(memo_key)
        if edge is not None:
            self.edge(nid, *edge)
            return
        name = ref.name
        value = dict.get(globals_, name, MISSING)
        module = dict.get(globals_, "__name__", "?")
        module = module if type(module) is str else "?"
        self.bind(BindingKind.DICT, globals_, name, value, nid, f"{module}.{name}")
        if name in _MODULE_PLUMBING and value is not MISSING:
            target = f"{module}:{name}"
            digest = parts_digest("module-plumbing", str(module), name)
            self.add(target, NodeKind.GLOBAL, digest, detail=f"<{name} of {module}>")
            self.edge(nid, target, EdgeKind.READS, name)
            return
        home, key = globals_, name
        if value is MISSING:
            builtins = dict.get(globals_, "__builtins__", {})
            builtins = module_dict(builtins) if is_a(builtins, ModuleType) else builtins
            value = dict.get(builtins, name, MISSING) if is_a(builtins, dict) else MISSING
            if value is MISSING:
                self.edge(nid, self.unresolved(nid, name, "name is not defined"), EdgeKind.CALLS, name)
                return
            self.bind(BindingKind.DICT, builtins, name, value, nid, f"builtins.{name}")
            home = builtins
        edge = self._follow_chain(nid, value, home, key, ref.attrs, name)
        if edge is not None:
            self.resolved[memo_key] = edge

    def _follow_chain(
        self, nid: str, value: object, home: dict, key: str, attrs: tuple[str, ...], label: str
    ) -> tuple[str, EdgeKind, str] | None:
        """Resolve ``value.attrs...`` and add the edge from ``nid``; returns that edge's
        (target, kind, label) when it is the only one and does not depend on ``nid`` (None:
        unresolved, or the chain went through an instance, which has an edge of its own)."""
        owner: type | None = None
        alone = True
        for i, attr in enumerate(attrs) if attrs else ():
            if is_a(value, ModuleType):
                namespace = module_dict(value)  # type: ignore[arg-type]
                name = dict.get(namespace, "__name__")
                name = name if type(name) is str else "?"
                if self.is_external(name, value):  # type: ignore[arg-type]
                    data = self._library_data(nid, value, attrs[i:], label)  # type: ignore[arg-type]
                    if data is not None:
                        return data
                    dotted = ".".join((name, *attrs[i:]))
                    edge = (self.external(dotted), EdgeKind.CALLS, ".".join((label, *attrs[i:])))
                    self.edge(nid, *edge)
                    return edge
                home, key = namespace, attr
                nxt = dict.get(home, attr, MISSING)
                self.bind(BindingKind.DICT, home, attr, nxt, nid, f"{name}.{attr}")
                if nxt is MISSING and type(dict.get(namespace, "__getattr__")) is FunctionType:
                    self._lazy_attribute(nid, value, attrs[i:], label)  # type: ignore[arg-type]
                    return None
            elif is_a(value, type) and not is_external_type(value):  # type: ignore[arg-type]
                cls: type = value  # type: ignore[assignment]
                defining, nxt, looked = lookup_mro(cls, attr)
                for namespace, seen in looked:
                    self.bind(BindingKind.DICT, namespace, attr, seen, nid, f"{object_qualname(cls)}.{attr}")
                home, key, owner = (class_dict(defining) if defining is not None else home), attr, cls
            else:
                found = self._through_instance(nid, value, attr, _hint(home, key), label)
                if found is None:
                    break  # attribute of a value: the value's snapshot covers it
                (defining, nxt), owner, alone = found, type(value), False
                home, key = class_dict(defining), attr
            label = f"{label}.{attr}"
            if nxt is MISSING:
                self.edge(nid, self.unresolved(nid, label, "attribute not found"), EdgeKind.CALLS, label)
                return None
            value = nxt
        target = self.visit(value, owner, _hint(home, key))
        calls = issubclass(type(value), _CODE_TYPES) or target.startswith("external:")
        self.edge(nid, target, _CALLS if calls else _READS, label)
        return (target, _CALLS if calls else _READS, label) if alone else None

    def _through_instance(self, nid: str, obj: object, attr: str, hint: str, label: str) -> tuple[type, object] | None:
        """``obj.attr`` on a user instance that does not hold ``attr`` itself: the lookup along
        its class's MRO, each namespace looked at bound (a method or constant added to a
        subclass later shadows the base's); the instance is reached by an edge of its own
        (its state and class). ``(defining class, raw value)``, or None to stop at ``obj``."""
        t = type(obj)
        if is_external_type(t) or is_a(obj, (tuple, list, dict, set, frozenset)):
            return None
        state = instance_dict(obj)
        if state is not None and attr in dict.keys(state):  # the instance's own: its snapshot covers it
            return None
        defining, value, looked = lookup_mro(t, attr)
        for namespace, seen in looked:
            self.bind(BindingKind.DICT, namespace, attr, seen, nid, f"{object_qualname(t)}.{attr}")
        if defining is None:  # served by __getattr__ or absent: the instance's state and class cover it
            return None
        self.edge(nid, self.visit(obj, None, hint), _READS, label)
        return defining, value

    def _library_data(
        self, nid: str, module: ModuleType, attrs: tuple[str, ...], label: str
    ) -> tuple[str, EdgeKind, str] | None:
        """``lib.sub.FLAG`` ending at a plain data value: each namespace entry bound (an
        ``ENTRY``: a library namespace, not one a build writes) and the library's leaf for
        it digested with the value (a monkeypatch is a new key, as an upgrade is, not data
        drift); None for anything else."""
        entries: list[tuple[dict, str, object, str]] = []
        current: object = module
        for n, attr in enumerate(attrs):
            namespace = module_dict(current)  # type: ignore[arg-type]
            owner = module_name(current)  # type: ignore[arg-type]
            value = dict.get(namespace, attr, MISSING)
            entries.append((namespace, attr, value, f"{owner}.{attr}"))
            if is_a(value, ModuleType):
                current = value
                continue
            if value is MISSING or not _plain(value, 0):
                return None
            for home, key, seen, shown in entries:
                self.bind(_ENTRY, home, key, seen, nid, shown)
            dotted = f"{owner}.{attr}"
            target = external_id(dotted)
            if target not in self.nodes:  # the library's leaf, with the value it holds now
                library, shown = _origin.external_digest(dotted)
                digest = parts_digest("library-data", library, self.snapshot(value, target).digest)
                self.add(target, NodeKind.EXTERNAL, digest, detail=f"{shown}; {attr}={describe(value)}")
            edge = (target, _CALLS, ".".join((label, *attrs[: n + 1])))
            self.edge(nid, *edge)
            return edge
        return None

    def _lazy_attribute(self, nid: str, package: ModuleType, attrs: tuple[str, ...], label: str) -> None:
        """``pkg.name...`` where ``pkg`` has no ``name`` but a module ``__getattr__`` (PEP 562):
        that function runs (walked as a call: its code, the table it reads, its imports), and
        what it returns is observed where such tables point, the package's imported
        submodules' attribute of that name (each bound, the rest of the chain followed on; a
        submodule imported later is a change of the package's namespace, where the import
        machinery binds it)."""
        namespace = module_dict(package)
        getter = dict.get(namespace, "__getattr__")
        label = f"{label}.{attrs[0]}"
        self.edge(nid, self.visit(getter, None, f"{module_name(package)}:__getattr__"), _CALLS, f"{label}<__getattr__>")
        prefix = module_name(package) + "."
        for key, sub in dict_items(namespace):
            if type(key) is not str or not is_a(sub, ModuleType) or not module_name(sub).startswith(prefix):  # type: ignore[arg-type]
                continue
            if dict.get(module_dict(sub), attrs[0], MISSING) is MISSING:  # type: ignore[arg-type]
                continue
            self.bind(BindingKind.DICT, namespace, key, sub, nid, f"{prefix}{key}")
            self._follow_chain(nid, sub, {}, key, attrs, f"{label}<{module_name(sub)}>")  # type: ignore[arg-type]

    def _module_entry(self, nid: str, name: str) -> object:
        """``sys.modules[name]`` as an import reads it, bound (``MISSING`` when absent)."""
        module = dict.get(sys.modules, name, MISSING)
        self.bind(_ENTRY, sys.modules, name, module, nid, f"sys.modules.{name}")
        return module

    def _resolve_import_reads(
        self, reads: tuple[ImportRead, ...], refs: tuple[NameRef, ...], nid: str, globals_: dict
    ) -> None:
        """The modules ``reads`` import (:func:`flydeps.code.bytecode.import_reads`) and the chains
        read on the locals they bind (``import m`` in the body, then ``m.VAL``)."""
        chains: dict[str, list[tuple[str, ...]]] = {}
        for ref in refs:
            if ref.scope == "local" and ref.attrs:
                chains.setdefault(ref.name, []).append(ref.attrs)
        for read in reads:
            if read.via and not self._is_import_module(read.via, globals_):
                continue
            name = _absolute(read.module, read.level, globals_)
            for more in chains.get(read.local, [()]) if read.local else [()]:
                module = self._module_entry(nid, name)
                label = read.local or name
                if module is MISSING:
                    self.edge(nid, self.unresolved(nid, name, "module not imported"), EdgeKind.IMPORTS, label)
                elif is_a(module, ModuleType):
                    self._follow_chain(nid, module, {}, name, (*read.attrs, *more), label)

    def _is_import_module(self, via: tuple[str, ...], globals_: dict) -> bool:
        """The callee or container ``via`` (a global and attributes) is ``importlib.import_module``,
        ``sys.modules`` or the builtin ``__import__``."""
        value = dict.get(globals_, via[0], MISSING)
        if value is MISSING and via == ("__import__",):
            builtins_ = dict.get(globals_, "__builtins__", MISSING)
            if is_a(builtins_, ModuleType):
                builtins_ = module_dict(builtins_)  # type: ignore[arg-type]
            value = dict.get(builtins_, "__import__", MISSING) if is_a(builtins_, dict) else MISSING  # type: ignore[arg-type]
            return value is builtins.__import__
        for attr in via[1:]:
            value = dict.get(module_dict(value), attr, MISSING) if is_a(value, ModuleType) else MISSING  # type: ignore[arg-type]
        return value is importlib.import_module or value is sys.modules

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
        hint = node_id(module_of(defining), f"{type_qualname(defining)}.{attr}")
        self.edge(nid, self.visit(value, owner, hint), EdgeKind.METHOD, label)

    def _resolve_import(self, ref: NameRef, nid: str, globals_: dict) -> None:
        name = _absolute(ref.name, ref.level, globals_)
        module = self._module_entry(nid, name)
        if module is MISSING or module is None:
            self.edge(nid, self.unresolved(nid, ref.name, "module not imported"), EdgeKind.IMPORTS, ref.name)
            return
        self._follow_chain(nid, module, {}, name, ref.attrs, ref.name)

    def _resolve_free_chains(self, code: CodeType, nid: str, closure: tuple) -> None:
        """``mod.helper`` where ``mod`` is a closure variable holding a module or a user class
        resolves like a global's chain: the attribute read is bound and walked."""
        cells = dict(zip(code.co_freevars, closure))
        for ref in code_refs(code):
            if ref.scope != "free" or not ref.attrs or ref.name in ("self", "cls") or ref.name not in cells:
                continue
            try:
                value = cells[ref.name].cell_contents
            except ValueError:
                continue
            if is_a(value, ModuleType) or (is_a(value, type) and not is_external_type(value)):
                self._follow_chain(nid, value, {}, ref.name, ref.attrs, ref.name)


def _hint(home: dict, key: str) -> str:
    """The node id of a value found as ``key`` of namespace ``home`` (a module's or a class's)."""
    home_name = dict.get(home, "__name__", None) if type(home) is dict or is_a(home, dict) else None
    return f"{home_name if type(home_name) is str else class_id(home)}:{key}"


def _absolute(name: str, level: int, globals_: dict) -> str:
    """The absolute module name of ``from <level dots><name> import ...`` run in ``globals_``."""
    if not level:
        return name
    package = dict.get(globals_, "__package__")
    package = package if type(package) is str and package else dict.get(globals_, "__name__", "")
    parts = (package if type(package) is str else "").split(".")
    base = ".".join(parts[: len(parts) - level + 1]) if level <= len(parts) else ""
    return f"{base}.{name}" if base and name else base or name


def _plain(value: object, depth: int) -> bool:
    """An atom, or a tuple/frozenset of plain values (by exact type: no subclass, no object)."""
    t = type(value)
    if id(t) in _PLAIN_ATOMS:
        return True
    if (t is tuple or t is frozenset) and depth < _PLAIN_DEPTH:
        return all(_plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    return False
