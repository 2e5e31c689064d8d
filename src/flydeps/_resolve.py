"""Name resolution for runtime discovery: what a name read by a code object resolves to.

Contract: given the names a code object reads (:class:`~flydeps._bytecode.NameRef`), looks
them up in the function's globals, the builtins, a closure variable holding a module or a
class, a module imported inside the function, or ``self``/``cls``'s class along the MRO,
following attribute chains (``mod.sub.fn``, ``Cls.attr``). Namespaces are read through
their real dicts with ``dict``'s own methods (a dict subclass's overrides never run) and
classes through ``type``'s descriptors: no user code runs. Every namespace entry looked at
is recorded as a binding (present or ``MISSING``) for the guard, and the object found is
handed to the walker's ``visit``. :class:`NameResolver` is the base of discovery's walker,
which provides ``visit`` and ``bind``.
"""

from __future__ import annotations

import sys
from types import CodeType, ModuleType

from blake3 import blake3

from ._bindings import _CODE_TYPES, MISSING, BindingKind, class_dict, is_a, lookup_mro
from ._builder import GraphBuilder
from ._bytecode import NameRef, code_refs
from ._objects import class_id, is_external_type, module_dict, module_of, object_qualname, type_qualname
from .graph import EdgeKind, NodeKind, node_id

__all__ = ["NameResolver", "parts_digest"]

# Module attributes that locate rather than define: keyed by the module they belong to,
# never by the absolute path or loader object they hold.
_CALLS, _READS = EdgeKind.CALLS, EdgeKind.READS
_MODULE_PLUMBING = frozenset({"__file__", "__cached__", "__path__", "__spec__", "__loader__", "__builtins__"})


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
        (target, kind, label) when it does not depend on ``nid`` (None: unresolved)."""
        owner: type | None = None
        for i, attr in enumerate(attrs) if attrs else ():
            if is_a(value, ModuleType):
                namespace = module_dict(value)  # type: ignore[arg-type]
                name = dict.get(namespace, "__name__")
                name = name if type(name) is str else "?"
                if self.is_external(name, value):  # type: ignore[arg-type]
                    dotted = ".".join((name, *attrs[i:]))
                    edge = (self.external(dotted), EdgeKind.CALLS, ".".join((label, *attrs[i:])))
                    self.edge(nid, *edge)
                    return edge
                home, key = namespace, attr
                nxt = dict.get(home, attr, MISSING)
                self.bind(BindingKind.DICT, home, attr, nxt, nid, f"{name}.{attr}")
            elif is_a(value, type) and not is_external_type(value):  # type: ignore[arg-type]
                cls: type = value  # type: ignore[assignment]
                defining, nxt, looked = lookup_mro(cls, attr)
                for namespace, seen in looked:
                    self.bind(BindingKind.DICT, namespace, attr, seen, nid, f"{object_qualname(cls)}.{attr}")
                home, key, owner = (class_dict(defining) if defining is not None else home), attr, cls
            else:
                break  # attribute of a value: the value's snapshot covers it
            label = f"{label}.{attr}"
            if nxt is MISSING:
                self.edge(nid, self.unresolved(nid, label, "attribute not found"), EdgeKind.CALLS, label)
                return None
            value = nxt
        home_name = dict.get(home, "__name__", None) if type(home) is dict or is_a(home, dict) else None
        hint = f"{home_name if type(home_name) is str else class_id(home)}:{key}"
        target = self.visit(value, owner, hint)
        calls = issubclass(type(value), _CODE_TYPES) or target.startswith("external:")
        self.edge(nid, target, _CALLS if calls else _READS, label)
        return target, _CALLS if calls else _READS, label

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
        name = ref.name
        if ref.level:  # ``from .mem import x`` inside a function: relative to the package
            package = dict.get(globals_, "__package__")
            package = package if type(package) is str and package else dict.get(globals_, "__name__", "")
            parts = (package if type(package) is str else "").split(".")
            base = ".".join(parts[: len(parts) - ref.level + 1]) if ref.level <= len(parts) else ""
            name = f"{base}.{name}" if base and name else base or name
        module = sys.modules.get(name)
        if module is None:
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
