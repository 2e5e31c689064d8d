"""Symbol tables: what a name in a module (or a class) refers to, across modules.

Contract: read-only queries over file summaries, loaded on demand through a loader
callback (so only modules that are actually reached get parsed). Resolution follows
Python's rules statically: a module's own bindings, then its ``from x import *`` sources
(``__all__``, else public names), then submodules of a package; imports are absolute or
relative, re-exports through ``__init__.py`` are followed, an alias assignment
(``load = mem.load``) is the object it names, and classes have a C3 MRO computed from
their (resolved) bases. Every answer is a :class:`Target`; what cannot be resolved is a
``Target`` of kind ``unresolved`` with the reason, never an exception. Re-export and
alias cycles end as ``unresolved`` ("import cycle").
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field

from .project import ModuleFile, Project, resolve_relative
from .summary import Binding, ClassBinding, ClassInfo, CodeInfo, DefBinding, FileSummary, ImportBinding, ValueBinding

__all__ = ["Index", "LoadedModule", "Target"]

_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class LoadedModule:
    """A summarized project module with lookup tables built once."""

    file: ModuleFile
    summary: FileSummary
    scope: dict[str, Binding] = field(init=False, compare=False)
    codes: dict[str, CodeInfo] = field(init=False, compare=False)
    classes: dict[str, ClassInfo] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", dict(self.summary.scope))
        object.__setattr__(self, "codes", {c.qualname: c for c in self.summary.codes})
        object.__setattr__(self, "classes", {c.qualname: c for c in self.summary.classes})

    @property
    def name(self) -> str:
        return self.file.name

    def exports(self) -> tuple[str, ...]:
        """Names ``from this import *`` binds (``__all__`` or the public names)."""
        if self.summary.all_names is not None:
            return self.summary.all_names
        return tuple(n for n in self.scope if not n.startswith("_"))


@dataclass(frozen=True)
class Target:
    """What a name refers to.

    kind: ``module`` (project module ``module``), ``def`` (function code ``qualname`` in
    ``module``), ``class``, ``value`` (a data binding ``qualname`` in ``module``; ``binding``
    holds it), ``external`` / ``builtin`` (``dotted``), ``unresolved`` (``reason``).
    ``owner`` is the class (module, qualname) a method was looked up through.
    """

    kind: str
    module: str = ""
    qualname: str = ""
    dotted: str = ""
    reason: str = ""
    binding: Binding | None = None
    owner: tuple[str, str] | None = None


def unresolved(reason: str) -> Target:
    return Target("unresolved", reason=reason)


Loader = Callable[[str], "LoadedModule | None"]


class Index:
    """Name resolution over the project's modules, loading each on first use."""

    def __init__(self, project: Project, loader: Loader) -> None:
        self.project = project
        self._load = loader
        self._mro: dict[tuple[str, str], tuple[Target, ...]] = {}

    def module(self, name: str) -> LoadedModule | None:
        return self._load(name)

    # -- module scope ----------------------------------------------------------------
    def lookup(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Target | None:
        """What ``name`` means at module level in ``module``; None if not bound there."""
        key = (module, name)
        if key in seen:
            return unresolved(f"import cycle through {module}.{name}")
        seen = seen | {key}
        loaded = self.module(module)
        if loaded is None:
            return None
        binding = loaded.scope.get(name)
        if binding is not None:
            return self.binding_target(loaded, name, binding, seen)
        for star in reversed(loaded.summary.star_imports):
            found = self._from_star(loaded, star, name, seen)
            if found is not None:
                return found
        if loaded.file.is_package and self.project.find(f"{module}.{name}") is not None:
            return Target("module", module=f"{module}.{name}")
        return None

    def _from_star(self, loaded: LoadedModule, star: ImportBinding, name: str, seen: frozenset) -> Target | None:
        base = resolve_relative(loaded.name, loaded.file.is_package, star.module, star.level)
        if base is None:
            return None
        source = self.module(base)
        if source is None:
            return Target("external", dotted=f"{base}.{name}") if star.level == 0 and name not in _BUILTINS else None
        return self.lookup(base, name, seen) if name in source.exports() else None

    def binding_target(self, loaded: LoadedModule, name: str, binding: Binding, seen: frozenset = frozenset()) -> Target:
        """The target of one binding in ``loaded``'s module scope (or a class body)."""
        if isinstance(binding, DefBinding):
            return Target("def", module=loaded.name, qualname=binding.qualname)
        if isinstance(binding, ClassBinding):
            return Target("class", module=loaded.name, qualname=binding.qualname)
        if isinstance(binding, ImportBinding):
            return self.import_target(loaded, binding, seen)
        if isinstance(binding, ValueBinding) and binding.refs[:1] and binding.refs[0][0] == "alias":
            return self.resolve_dotted(loaded.name, binding.refs[0][1], seen)[0]
        return Target("value", module=loaded.name, qualname=name, binding=binding)

    def import_target(self, loaded: LoadedModule, imp: ImportBinding, seen: frozenset = frozenset()) -> Target:
        """What an import statement binds."""
        base = resolve_relative(loaded.name, loaded.file.is_package, imp.module if imp.name else imp.bound_module, imp.level)
        if base is None:
            return unresolved(f"relative import beyond the top-level package in {loaded.name}")
        if not imp.name:
            return self.module_target(base)
        if self.module(base) is not None:
            found = self.lookup(base, imp.name, seen)
            if found is not None:
                return found
        sub = f"{base}.{imp.name}"
        if self.project.find(sub) is not None or (self.module(base) is None and self.project.is_namespace(sub)):
            return Target("module", module=sub)
        if self.module(base) is not None or imp.level:
            return unresolved(f"module {base} has no name {imp.name}")
        return Target("external", dotted=sub)

    def module_target(self, name: str) -> Target:
        if self.project.find(name) is not None or self.project.is_namespace(name):
            return Target("module", module=name)
        return Target("external", dotted=name)

    # -- attributes and dotted names -------------------------------------------------
    def attr(self, target: Target, name: str, seen: frozenset = frozenset()) -> Target | None:
        """``target.name``; None when the chain stops (an attribute of a function or value)."""
        if target.kind == "module":
            found = self.lookup(target.module, name, seen) if self.module(target.module) else None
            if found is None and self.project.find(f"{target.module}.{name}") is not None:
                return Target("module", module=f"{target.module}.{name}")
            return found or unresolved(f"module {target.module} has no attribute {name}")
        if target.kind in ("external", "builtin"):
            return Target("external", dotted=f"{target.dotted}.{name}")
        if target.kind == "class":
            return self.member(target, name)
        return None

    def resolve_dotted(self, module: str, text: str, seen: frozenset = frozenset()) -> tuple[Target, str]:
        """Resolve ``a.b.c`` at module level; returns the target and the consumed text."""
        head, *rest = text.split(".")
        target = self.global_name(module, head, seen)
        return self.follow(target, tuple(rest), head, seen)

    def follow(self, target: Target, attrs: tuple[str, ...], label: str, seen: frozenset = frozenset()) -> tuple[Target, str]:
        for name in attrs:
            nxt = self.attr(target, name, seen)
            if nxt is None:
                break
            target, label = nxt, f"{label}.{name}"
            if target.kind == "unresolved":
                break
        return target, label

    def global_name(self, module: str, name: str, seen: frozenset = frozenset()) -> Target:
        """A global read: module scope, then builtins, else unresolved."""
        found = self.lookup(module, name, seen)
        if found is not None:
            return found
        if name in _BUILTINS:
            return Target("builtin", dotted=f"builtins.{name}")
        return unresolved("name is not defined")

    # -- classes ---------------------------------------------------------------------
    def class_info(self, target: Target) -> ClassInfo | None:
        loaded = self.module(target.module)
        return loaded.classes.get(target.qualname) if loaded else None

    def bases(self, target: Target) -> list[Target]:
        info = self.class_info(target)
        if info is None:
            return []
        out = []
        for text in info.bases:
            base = self.resolve_dotted(target.module, text)[0] if text else unresolved("computed base class")
            if not (base.kind == "builtin" and base.dotted == "builtins.object"):
                out.append(base)
        return out

    def mro(self, target: Target) -> tuple[Target, ...]:
        """C3 linearization; project classes are expanded, other bases end the chain."""
        key = (target.module, target.qualname)
        if key in self._mro:
            return self._mro[key]
        self._mro[key] = (target,)  # cycle guard: a class inheriting from itself
        seqs = [list(self.mro(b)) if b.kind == "class" else [b] for b in self.bases(target)]
        self._mro[key] = (target, *_c3_merge([*seqs, self.bases(target)]))
        return self._mro[key]

    def member(self, cls: Target, name: str, owner: tuple[str, str] | None = None) -> Target | None:
        """``name`` looked up along ``cls``'s MRO, with ``owner`` (default ``cls``) attached."""
        owner = owner or (cls.module, cls.qualname)
        for klass in self.mro(cls):
            if klass.kind != "class":
                continue
            info = self.class_info(klass)
            binding = dict(info.body).get(name) if info else None
            if binding is None:
                continue
            loaded = self.module(klass.module)
            assert loaded is not None
            found = self.binding_target(loaded, f"{klass.qualname}.{name}", binding)
            return Target(found.kind, found.module, found.qualname, found.dotted, found.reason, found.binding, owner)
        return None


def _c3_merge(seqs: list[list[Target]]) -> list[Target]:
    """C3 merge; on an inconsistent hierarchy fall back to depth-first order (Python would
    raise TypeError at import; we still want a graph)."""
    seqs = [list(s) for s in seqs if s]
    out: list[Target] = []
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:
            head = seqs[0][0]
        out.append(head)
        seqs = [[t for t in s if t != head] for s in seqs]
        seqs = [s for s in seqs if s]
    return out
