"""Graph building: roots + symbol tables -> :class:`~flydeps.graph.DepGraph`.

Contract: reads summaries through an :class:`~flydeps.static.symbols.Index`; produces the
same model, node ids, own digests and edge labels as the runtime discovery
(``flydeps.discover``) wherever the static view can know them:

* a function's own digest is ``code_digest`` of its code object compiled from the file;
* the names a function reads are the code object's references (``code_refs``), so Python's
  own scoping decides global / free / local; globals resolve through the module's symbol
  table, attribute chains through modules and classes, ``self.x``/``cls.x`` on the owner
  class's MRO (a method reached through a subclass is ``mod:Base.m@mod:Sub``);
* nested function codes are ``nested`` edges; free variables that name a function of an
  enclosing scope are ``closure`` edges; a nested function also links to its enclosing
  code (``<enclosing>``), which produces its closure cells, defaults and decorator
  arguments (a kernel nested in a plain builder is a root of its own);
* decorator call arguments (``known_block_size=[N, 1, 1]``) are ``#decorator.N`` nodes;
  ``Cls.m = transform(Cls.m)`` at module level links ``Cls.m`` to the patch (``#patch.N``);
  ``except ImportError:`` rebinding links readers to the fallback too (``f (fallback)``);
* literal globals and defaults digest like the runtime's value snapshot; other values
  digest their normalized expression and are tagged ``static-expression``;
* library code is an ``external:`` leaf (``distribution==version``), what cannot be
  resolved an ``unresolved:`` node with the reason. Nothing is dropped.

Roles are tags: ``factory`` (``functools.lru_cache``/``cache``, ``cached_factory``),
``kernel`` (``@flyc.kernel``), ``launcher`` (``@flyc.jit``). The build is a work list
(no recursion), so deep chains and cycles are safe.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from blake3 import blake3

from ..code.graphbuild import GraphBuilder
from ..graph import DepGraph, EdgeKind, Location, Node, NodeKind, node_id
from .project import Diagnostic
from .summary import Binding, ClassBinding, ClassInfo, CodeInfo, DefBinding, ImportBinding, ValueBinding
from .symbols import Index, LoadedModule, Target, unresolved

__all__ = ["RootSpec", "build_graph", "role_tags"]

Owner = tuple[str, str]  # (module, class qualname)
STATIC_EXPRESSION = "static-expression"
CLASS_STATEMENT = "<class>"  # label of the edge from a class attribute's value to its class
_CALL_TIME = "local value known only at call time"
_OBJECT_ATTRIBUTES = frozenset(dir(object)) | {"__dict__", "__name__", "__qualname__", "__module__", "__weakref__"}
_VALUE_EDGE = {"type": EdgeKind.CALLS, "func": EdgeKind.DECORATES}


@dataclass(frozen=True, slots=True)
class RootSpec:
    """A function code to start from, optionally looked up through ``owner`` (a subclass)."""

    module: str
    qualname: str
    owner: Owner | None = None


def _digest(*parts: str) -> str:
    # Same construction as the runtime's leaf digests (discover._digest).
    return blake3("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def role_tags(index: Index, loaded: LoadedModule, info: CodeInfo) -> frozenset[str]:
    """``factory`` / ``kernel`` / ``launcher`` from the decorators of ``info`` (memoized)."""
    key = (loaded.name, info.qualname)
    found = index.tags.get(key)
    if found is None:
        found = index.tags[key] = _role_tags(index, loaded, info)
    return found


def _role_tags(index: Index, loaded: LoadedModule, info: CodeInfo) -> frozenset[str]:
    if not info.decorators:
        return frozenset()
    tags = set()
    for text in info.decorators:
        target = decorator_target(index, loaded, info, text) if text else unresolved("")
        name = target.dotted if target.kind == "external" else text
        tag = _role(name)
        if tag:
            tags.add(tag)
    return frozenset(tags)


def _role(dotted: str) -> str:
    head, _, last = dotted.rpartition(".")
    top = head.partition(".")[0]
    if dotted in ("functools.lru_cache", "functools.cache") or last == "cached_factory":
        return "factory"
    if top in ("flydsl", "flydsl_runtime", "flyc") and last in ("kernel", "jit"):
        return "kernel" if last == "kernel" else "launcher"
    return ""


def scope_binding(loaded: LoadedModule, start: str, name: str) -> tuple[Binding, str] | None:
    """The binding of ``name`` in function scope ``start`` or the functions enclosing it."""
    qual = start
    while qual:
        info = loaded.codes.get(qual)
        if info is None:
            return None
        binding = loaded.local_scope(qual).get(name)
        if binding is not None:
            return binding, qual
        qual = info.parent
    return None


def decorator_target(index: Index, loaded: LoadedModule, info: CodeInfo, text: str) -> Target:
    """A decorator (or a default value) is evaluated where the ``def`` stands: a method's
    in its class body (``@value.setter``, ``default=__marker``), anything else in the
    enclosing function or module scope."""
    head, *rest = text.split(".")
    earlier = dict(info.decorator_scope)
    if head in earlier:
        return index.follow(index.binding_target(loaded, head, earlier[head]), tuple(rest), head)[0]
    if info.kind == "method":
        cls_qual = info.qualname.rpartition(".")[0]
        if head in loaded.class_body(cls_qual):
            found = index.member(Target("class", module=loaded.name, qualname=cls_qual), head)
            return index.follow(found, tuple(rest), head)[0] if found else unresolved("not in the class body")
    return scope_resolve(index, loaded, info.parent, text)


def scope_resolve(index: Index, loaded: LoadedModule, start: str, text: str) -> Target:
    """Resolve dotted ``text`` as code in function scope ``start`` would (locals, then globals)."""
    head, *rest = text.split(".")
    found = scope_binding(loaded, start, head)
    if found is None:
        target = index.global_name(loaded.name, head)
    elif isinstance(found[0], (DefBinding, ClassBinding, ImportBinding)):
        target = index.binding_target(loaded, head, found[0])
    else:
        return unresolved(_CALL_TIME)
    return index.follow(target, tuple(rest), head)[0]


class _Builder(GraphBuilder):
    """Creates nodes on first sight and expands them from a work list."""

    def __init__(self, index: Index) -> None:
        super().__init__()
        self.index = index
        self.work: deque[tuple[str, Callable[[], None]]] = deque()
        self.problems: list[Diagnostic] = []

    def run(self) -> None:
        while self.work:
            nid, expand = self.work.popleft()
            try:
                expand()
            except RecursionError:  # a pathological chain: keep the rest of the graph
                node = self.nodes[nid]
                where = node.location
                self.problems.append(
                    Diagnostic(
                        where.path if where else nid,
                        where.line if where else 1,
                        f"{nid}: name chain too deep to resolve; its dependencies are incomplete",
                    )
                )

    # -- targets ---------------------------------------------------------------------
    def link(
        self, src: str, target: Target, label: str, kind: EdgeKind | None = None, seen: frozenset = frozenset()
    ) -> None:
        """An edge from ``src`` to whatever ``target`` is (creating the node); ``seen``: the
        (module, name) entries whose other bindings are already linked (re-export cycles)."""
        code = target.kind in ("def", "class", "external", "builtin")
        default = EdgeKind.CALLS if code or target.kind == "unresolved" else EdgeKind.READS
        self.edge(src, self.target_node(src, target, label), kind or default, label)
        if target.fallback is not None and target.fallback not in seen:  # ``except ImportError``, issue 37
            seen = seen | {target.fallback}
            primary = (target.kind, target.module, target.qualname, target.dotted)
            for other, why in self.index.fallback_targets(*target.fallback):
                if (other.kind, other.module, other.qualname, other.dotted) != primary or other.home != target.home:
                    self.link(src, other, f"{label} ({why})", kind, seen)

    def target_node(self, src: str, target: Target, label: str) -> str:
        if target.kind == "def":
            return self.code(target.module, target.qualname, target.owner)
        if target.kind == "class":
            return self.klass(target)
        if target.kind == "value":
            return self.value(target)
        if target.kind == "module":
            nid = f"{target.module}:"
            self.add(nid, NodeKind.MODULE, _digest("module", target.module))
            return nid
        if target.kind in ("external", "builtin"):
            return self.external(target.defined or target.dotted)
        return self.unresolved(src, label, target.reason)

    # -- code ------------------------------------------------------------------------
    def root(self, spec: RootSpec) -> str:
        loaded = self.index.module(spec.module)
        if loaded is not None and spec.qualname in loaded.classes:
            return self.klass(Target("class", module=spec.module, qualname=spec.qualname))
        return self.code(spec.module, spec.qualname, spec.owner)

    def code(self, module: str, qualname: str, owner: Owner | None) -> str:
        loaded = self.index.module(module)
        info = loaded.codes.get(qualname) if loaded else None
        if loaded is None or info is None:
            return self.unresolved(f"{module}:{qualname}", qualname, "no such function in the source")
        defining = _defining_class(loaded, info)
        shown = owner if owner and defining and owner != defining else None
        nid = node_id(module, qualname, node_id(*shown) if shown else None)
        kind = NodeKind.METHOD if info.kind == "method" else NodeKind.FUNCTION
        location = Location(loaded.file.location_path, info.line)
        tags = role_tags(self.index, loaded, info)
        if self.add(nid, kind, info.digest, location=location, tags=tags):
            effective = (owner or defining) if defining else None
            self.work.append((nid, lambda: self.expand_code(nid, loaded, info, effective)))
        return nid

    def expand_code(self, nid: str, loaded: LoadedModule, info: CodeInfo, owner: Owner | None) -> None:
        for child in info.nested:
            short = child.rpartition(".")[2].partition("#")[0]
            self.edge(nid, self.code(loaded.name, child, owner), EdgeKind.NESTED, short)
        for scope, name, attrs in info.refs:
            if scope == "global":
                target, label = self.index.follow(self.index.global_name(loaded.name, name), attrs, name)
                self.link(nid, target, label)
            elif attrs and name in ("self", "cls") and (name == info.self_name or scope == "free"):
                self.self_ref(nid, attrs[0], owner)
            elif scope == "free":
                self.free_ref(nid, loaded, info, name, attrs)
            elif scope == "import":
                self.import_ref(nid, loaded, info, name, attrs)
        if info.kind == "method" and any(r[1] == "super" or r[1] == "__class__" for r in info.refs if not r[2]):
            self.class_cell(nid, loaded, info, owner)
        if not info.parent or info.kind == "method":  # only these exist as function objects
            self.defaults(nid, loaded, info)
        if info.parent:
            # The enclosing code runs first and produces everything a nested function is made
            # of: its closure cells, defaults, annotations and decorator arguments.
            self.edge(nid, self.code(loaded.name, info.parent, owner), EdgeKind.CLOSURE, "<enclosing>")
        for text in info.decorators:
            if text:
                self.link(nid, decorator_target(self.index, loaded, info, text), "@" + text, EdgeKind.DECORATES)
        for index, args in info.decorator_args:
            self.decorator_args(nid, loaded, info, index, args)
        if info.kind == "method":
            self.patches(nid, loaded, info)

    def decorator_args(self, nid: str, loaded: LoadedModule, info: CodeInfo, index: int, args: ValueBinding) -> None:
        """``@flyc.kernel(known_block_size=[N, 1, 1])``: the arguments as written, and what
        they read where the ``def`` stands (a builder's locals: see ``<enclosing>``)."""
        vid = f"{nid}#decorator.{index}"
        self.add(vid, NodeKind.GLOBAL, args.digest, detail=args.text, tags=frozenset({STATIC_EXPRESSION}))
        self.edge(nid, vid, EdgeKind.DECORATES, f"@{info.decorators[index] or 'decorator'}(...)")
        for _, text in args.refs:
            target = decorator_target(self.index, loaded, info, text)
            if not (target.kind == "unresolved" and target.reason == _CALL_TIME):
                self.link(vid, target, text)

    def patches(self, nid: str, loaded: LoadedModule, info: CodeInfo) -> None:
        """``Cls.m = transform(Cls.m)`` after the class statement: what the patch reads
        (``transform``) is a dependency of the method it replaces."""
        cls_qual, _, attr = info.qualname.rpartition(".")
        for n, (module, binding) in enumerate(self.index.patches_of(loaded.name, cls_qual, attr)):
            vid = f"{nid}#patch.{n}"  # the patch expression as written (its literal arguments)
            self.add(vid, NodeKind.GLOBAL, binding.digest, detail=binding.text, tags=frozenset({STATIC_EXPRESSION}))
            self.edge(nid, vid, EdgeKind.DECORATES, f"@{cls_qual}.{attr} = ...")
            for _, text in binding.refs:
                target = self.index.resolve_dotted(module, text)[0]
                if (target.kind, target.module, target.qualname) != ("def", loaded.name, info.qualname):
                    self.link(nid, target, "@" + text, EdgeKind.DECORATES)

    def self_ref(self, nid: str, attr: str, owner: Owner | None) -> None:
        label = f"self.{attr}"
        if owner is None:
            self.edge(nid, self.unresolved(nid, label, "no owner class to resolve self on"), EdgeKind.METHOD, label)
            return
        cls = Target("class", module=owner[0], qualname=owner[1])
        found = self.index.member(cls, attr) or self._from_opaque_base(cls, attr)
        if found is None:
            self.edge(nid, self.unresolved(nid, label, "instance attribute, not on the class"), EdgeKind.METHOD, label)
            return
        self.edge(nid, self.target_node(nid, found, label), EdgeKind.METHOD, label)

    def _from_opaque_base(self, cls: Target, attr: str) -> Target | None:
        """An attribute not defined in the project classes of the MRO may come from a
        library base class (then it is that library's leaf) or an unresolvable one."""
        for base in self.index.mro(cls):
            if base.kind in ("external", "builtin") and base.dotted != "builtins.object":
                return Target("external", dotted=f"{base.defined or base.dotted}.{attr}")
            if base.kind == "unresolved":
                return unresolved(f"not on the class; may come from a base class that is unresolved: {base.reason}")
        if attr in _OBJECT_ATTRIBUTES:  # self.__class__, self.__dict__, ...
            return Target("external", dotted=f"builtins.object.{attr}")
        return None

    def class_cell(self, nid: str, loaded: LoadedModule, info: CodeInfo, owner: Owner | None) -> None:
        """A method using ``super()`` has a ``__class__`` cell: the defining class (as the
        runtime sees it) and, for ``super().m()``, the method it shadows on the owner's MRO."""
        defining = _defining_class(loaded, info)
        if defining is None:
            return
        cell = self.klass(Target("class", module=defining[0], qualname=defining[1]))
        self.edge(nid, cell, EdgeKind.CLOSURE, "__class__")
        name = info.qualname.rpartition(".")[2]
        mro = self.index.mro(Target("class", module=(owner or defining)[0], qualname=(owner or defining)[1]))
        keys = [(t.module, t.qualname) for t in mro]
        after = mro[keys.index(defining) + 1 :] if defining in keys else ()
        for klass in after:
            found = self.index.member(klass, name, owner) if klass.kind == "class" else None
            if found is not None:
                self.edge(nid, self.target_node(nid, found, f"super().{name}"), EdgeKind.OVERRIDES, f"super().{name}")
                return

    def free_ref(self, nid: str, loaded: LoadedModule, info: CodeInfo, name: str, attrs: tuple[str, ...]) -> None:
        if name == "__class__" or name in loaded.local_scope(info.qualname):
            return  # the class cell (see class_cell), or a cell of this very code read by a comprehension
        found = scope_binding(loaded, info.parent, name)
        if found is None:
            self.edge(nid, self.unresolved(nid, name, "free variable without binding"), EdgeKind.CLOSURE, name)
            return
        binding, _ = found
        if isinstance(binding, DefBinding):
            self.edge(nid, self.code(loaded.name, binding.qualname, _owner_of(self.nodes[nid])), EdgeKind.CLOSURE, name)
        elif isinstance(binding, (ClassBinding, ImportBinding)):
            target, label = self.index.follow(self.index.binding_target(loaded, name, binding), attrs, name)
            self.link(nid, target, label, EdgeKind.CLOSURE)
        # Parameters and locals of the enclosing function hold call-time values: they are
        # covered by the enclosing code's digest and by its arguments (the cache key).

    def import_ref(self, nid: str, loaded: LoadedModule, info: CodeInfo, name: str, attrs: tuple[str, ...]) -> None:
        level = next((b.level for _, b in info.scope if isinstance(b, ImportBinding) and b.module == name), 0)
        imp = ImportBinding(0, name, "", level, name)
        target = self.index.import_target(loaded, imp)
        target, label = self.index.follow(target, attrs, name)
        if target.kind == "unresolved":
            self.edge(nid, self.unresolved(nid, name, target.reason), EdgeKind.IMPORTS, name)
        else:
            self.link(nid, target, label)

    def defaults(self, nid: str, loaded: LoadedModule, info: CodeInfo) -> None:
        # Default *values* are named after the parameter (``f#default.block``), as at run
        # time; a default that names code links to that code.
        for param, kind, payload in info.defaults:
            target = decorator_target(self.index, loaded, info, payload) if kind == "ref" else None
            if target is not None and target.kind != "value":
                self.edge(nid, self.target_node(nid, target, payload), EdgeKind.DEFAULT, param)
                continue
            if target is not None:
                assert isinstance(target.binding, ValueBinding)
                kind, payload = ("value" if target.binding.literal else "expr"), target.binding.digest
            vid = f"{nid}#default.{param}"
            tags = frozenset() if kind == "value" else frozenset({STATIC_EXPRESSION})
            self.add(vid, NodeKind.GLOBAL, payload, tags=tags)
            self.edge(nid, vid, EdgeKind.DEFAULT, param)
            for _, text in ((p, t) for p, t in info.default_refs if p == param):  # ``off=_helper()``
                found = decorator_target(self.index, loaded, info, text)
                if not (found.kind == "unresolved" and found.reason == _CALL_TIME):
                    self.link(vid, found, text)
        if info.annotations:  # evaluated at run time; here their text, as written
            vid = f"{nid}#annotations"
            self.add(vid, NodeKind.GLOBAL, info.annotations, tags=frozenset({STATIC_EXPRESSION}))
            self.edge(nid, vid, EdgeKind.ANNOTATION, "__annotations__")

    # -- classes and values ----------------------------------------------------------
    def klass(self, target: Target) -> str:
        info = self.index.class_info(target)
        loaded = self.index.module(target.module)
        nid = node_id(target.module, target.qualname)
        if info is None or loaded is None:
            return self.unresolved(nid, target.qualname, "no such class in the source")
        exact = bool(info.digest)
        digest = info.digest or info.body_digest
        tags = frozenset() if exact else frozenset({STATIC_EXPRESSION})
        location = Location(loaded.file.location_path, info.line)
        if self.add(nid, NodeKind.CLASS, digest, location=location, tags=tags):
            self.work.append((nid, lambda: self.expand_class(nid, target, loaded, info.body)))
        return nid

    def expand_class(self, nid: str, target: Target, loaded: LoadedModule, body: Iterable) -> None:
        for base in self.index.bases(target):
            self.link(nid, base, "base", EdgeKind.CALLS)
        methods = set()
        for name, binding in body:
            if isinstance(binding, DefBinding):
                methods.add(name)
                self.edge(nid, self.code(loaded.name, binding.qualname, None), EdgeKind.METHOD, name)
        info = loaded.classes.get(target.qualname)
        if info is not None and "<locals>" not in target.qualname:
            self.class_statement(nid, target, info, methods)

    def class_statement(self, nid: str, target: Target, info: ClassInfo, methods: set[str], whole: bool = True) -> None:
        """What the class statement runs besides its methods: decorators, the names its
        values and keywords read (``property(_getter)``, ``metaclass=Meta``), and data
        patched onto the class afterwards (``Cls.EPS = 1e-6``; patched methods: ``patches``)."""
        for text in info.decorators:
            if text:
                self.link(nid, self.index.resolve_dotted(target.module, text)[0], "@" + text, EdgeKind.DECORATES)
        for text in info.refs if whole else info.keyword_refs:
            found = self.index.resolve_dotted(target.module, text)[0]
            if found.kind != "unresolved":
                self.link(nid, found, text)
        for n, (attr, where, binding) in enumerate(self.index.class_patches(target.module, target.qualname)):
            if attr in methods:
                continue
            vid = f"{nid}#patch.{attr}.{n}"
            self.add(vid, NodeKind.GLOBAL, binding.digest, detail=binding.text, tags=frozenset({STATIC_EXPRESSION}))
            self.edge(nid, vid, EdgeKind.ATTRIBUTE, f"{info.qualname}.{attr} = ...")
            self.work.append((vid, functools.partial(self.expand_value, vid, where, binding)))

    def value(self, target: Target, nid: str = "") -> str:
        nid = nid or node_id(*(target.home or (target.module, target.qualname)))
        binding = target.binding
        if not isinstance(binding, ValueBinding):  # bound by a loop, a with, an unpacking...
            how = getattr(binding, "how", "a statement")
            detail = f"bound by {how}: value not known statically"
            self.add(
                nid, NodeKind.GLOBAL, _digest("bound-by", how, nid), detail=detail, tags=frozenset({STATIC_EXPRESSION})
            )
            return nid
        is_object = any(label == "type" for label, _ in binding.refs)
        kind = NodeKind.OBJECT if is_object else NodeKind.GLOBAL
        tags = frozenset() if binding.literal else frozenset({STATIC_EXPRESSION})
        loaded = self.index.module(target.module)
        location = Location(loaded.file.location_path, binding.line) if loaded else None
        if self.add(nid, kind, binding.digest, location=location, detail=binding.text, tags=tags):
            cls = None
            if target.owner is not None:  # ``Cls.X``: the class statement made it (decorators, metaclass, patches)
                cls = Target("class", module=target.module, qualname=target.qualname.rpartition(".")[0])
                self.statement_of(nid, cls)
            self.work.append((nid, lambda: self.expand_value(nid, target.module, binding, cls)))
        return nid

    def statement_of(self, nid: str, cls: Target) -> None:
        """``nid`` (a class attribute's value) -> ``Cls#statement``: what the class statement
        runs besides its methods (their bodies run only when called)."""
        info = self.index.class_info(cls)
        loaded = self.index.module(cls.module)
        if info is None or loaded is None or "<locals>" in cls.qualname:
            return
        methods = {name for name, b in info.body if isinstance(b, DefBinding)}
        patched = any(a not in methods for a, _, _ in self.index.class_patches(cls.module, cls.qualname))
        if not (info.head_digest or patched):  # a plain class statement: the value is all there is
            return
        sid = node_id(cls.module, cls.qualname) + "#statement"
        digest = info.head_digest or _digest("class-statement", cls.qualname)
        location = Location(loaded.file.location_path, info.line)
        if self.add(sid, NodeKind.GLOBAL, digest, location=location, tags=frozenset({STATIC_EXPRESSION})):
            self.work.append((sid, lambda: self.class_statement(sid, cls, info, methods, whole=False)))
        self.edge(nid, sid, EdgeKind.READS, CLASS_STATEMENT)

    def lambda_at(self, module: str, line: int) -> str:
        loaded = self.index.module(module)
        codes = loaded.codes.values() if loaded else ()
        found = next((c for c in codes if c.kind == "lambda" and c.line == line and not c.parent), None)
        if found is None:
            return self.unresolved(f"{module}:<lambda>", str(line), "lambda not found in the source")
        return self.code(module, found.qualname, None)

    def expand_value(self, nid: str, module: str, binding: ValueBinding, cls: Target | None = None) -> None:
        """What a value reads; a class attribute's value reads the class body's names first
        (``LANES = BLOCK // WARP`` with ``WARP`` bound above it in the class)."""
        loaded = self.index.module(cls.module) if cls is not None else None
        body = loaded.class_body(cls.qualname) if loaded is not None and cls is not None else {}
        for label, text in binding.refs:
            if text.startswith("<value>:"):  # a literal argument of functools.partial
                self.add(f"{nid}.{label}", NodeKind.GLOBAL, text[len("<value>:") :])
                self.edge(nid, f"{nid}.{label}", EdgeKind.ATTRIBUTE, label)
                continue
            if text.startswith("<lambda>@"):
                self.edge(nid, self.lambda_at(module, int(text.partition("@")[2])), EdgeKind.ATTRIBUTE, label)
                continue
            head, _, rest = text.partition(".")
            if cls is not None and head in body:
                found = self.index.member(cls, head) or unresolved(f"{cls.qualname}.{head} not found")
                target, consumed = self.index.follow(found, tuple(rest.split(".")) if rest else (), head)
            else:
                target, consumed = self.index.resolve_dotted(module, text)
            if label.startswith("[") and target.kind == "value":
                # An object stored in a table is named after its slot, as at run time.
                self.edge(nid, self.value(target, f"{nid}{label}"), EdgeKind.ATTRIBUTE, label)
                continue
            kind = _VALUE_EDGE.get(label) or (EdgeKind.ATTRIBUTE if label.startswith("[") else None)
            self.link(nid, target, label or consumed, kind)


def _defining_class(loaded: LoadedModule, info: CodeInfo) -> Owner | None:
    """The class whose method ``info`` is, or lies (nested) in; None for plain functions."""
    while info.kind != "method":
        parent = loaded.codes.get(info.parent) if info.parent else None
        if parent is None:
            return None
        info = parent
    return loaded.name, info.qualname.rpartition(".")[0]


def _owner_of(node: Node) -> Owner | None:
    _, _, owner = node.id.partition("@")
    module, _, qual = owner.partition(":")
    return (module, qual) if owner else None


def build_graph(index: Index, roots: Iterable[RootSpec]) -> tuple[DepGraph, list[Diagnostic]]:
    """The dependency graph reachable from ``roots``, and what could not be resolved."""
    builder = _Builder(index)
    ids = tuple(dict.fromkeys(builder.root(r) for r in roots))
    builder.run()
    return builder.graph(ids), builder.problems
