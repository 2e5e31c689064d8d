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
import functools
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from .. import settings
from .libnames import canonical
from .project import ModuleFile, Project, resolve_relative
from .summary import (
    Binding,
    ClassBinding,
    ClassInfo,
    CodeInfo,
    DefBinding,
    FileSummary,
    ImportBinding,
    LocalBinding,
    ValueBinding,
)

__all__ = ["Index", "LoadedModule", "Target"]

_BUILTINS = frozenset(dir(builtins))
# Globals every module has without binding them.
_MODULE_ATTRIBUTES = frozenset(
    {"__file__", "__name__", "__spec__", "__loader__", "__package__", "__path__", "__cached__", "__builtins__"}
)
# Longest chain of re-exports / aliases followed before giving up (keeps the recursion
# far from Python's limit whatever the input).
MAX_CHAIN = 64


@dataclass(frozen=True)
class LoadedModule:
    """A summarized project module with lookup tables built once."""

    file: ModuleFile
    summary: FileSummary
    scope: dict[str, Binding] = field(init=False, compare=False)
    codes: dict[str, CodeInfo] = field(init=False, compare=False)
    classes: dict[str, ClassInfo] = field(init=False, compare=False)
    fallbacks: dict[str, Binding] = field(init=False, compare=False)
    alternatives: dict[str, list[Binding]] = field(init=False, compare=False)
    star_after: dict[str, int] = field(init=False, compare=False)
    _tables: dict[str, dict[str, Binding]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", dict(self.summary.scope))
        object.__setattr__(self, "codes", {c.qualname: c for c in self.summary.codes})
        object.__setattr__(self, "classes", {c.qualname: c for c in self.summary.classes})
        object.__setattr__(self, "fallbacks", dict(self.summary.fallbacks))
        alternatives: dict[str, list[Binding]] = {}
        for name, binding in self.summary.alternatives:
            alternatives.setdefault(name, []).append(binding)
        object.__setattr__(self, "alternatives", alternatives)
        object.__setattr__(self, "star_after", dict(self.summary.star_after))
        object.__setattr__(self, "_tables", {})

    @property
    def name(self) -> str:
        return self.file.name

    def local_scope(self, qualname: str) -> dict[str, Binding]:
        """What function ``qualname`` binds (built once per function)."""
        return self._table("f" + qualname, lambda: self.codes[qualname].scope if qualname in self.codes else ())

    def class_body(self, qualname: str) -> dict[str, Binding]:
        """What class ``qualname``'s body binds (built once per class)."""
        return self._table("c" + qualname, lambda: self.classes[qualname].body if qualname in self.classes else ())

    def _table(self, key: str, items: Callable[[], tuple[tuple[str, Binding], ...]]) -> dict[str, Binding]:
        found = self._tables.get(key)
        if found is None:
            found = self._tables[key] = dict(items())
        return found


class Target(NamedTuple):
    """What a name refers to (a NamedTuple: resolution creates tens of thousands).

    kind: ``module`` (project module ``module``), ``def`` (function code ``qualname`` in
    ``module``), ``class``, ``value`` (a data binding ``qualname`` in ``module``; ``binding``
    holds it), ``external`` / ``builtin`` (``dotted``), ``unresolved`` (``reason``).
    ``owner`` is the class (module, qualname) a method was looked up through. ``home`` is
    the (module, name) namespace entry a value was read from when it is not where the value
    is defined (``from .a import TABLE``): the runtime names value nodes by that entry.
    ``fallback`` names a module-level entry that an ``except ImportError`` handler binds
    again (``try: from lib import f`` / ``except ImportError: def f``). A library name
    bound in a project namespace keeps ``dotted`` as imported (the call graph's name, as
    PyCG's) and gets ``defined``, where the library defines it (:mod:`.libnames`; the
    dependency graph's leaf, as the runtime names the object it finds there); ``stop``: a
    chain through it ends there.
    """

    kind: str
    module: str = ""
    qualname: str = ""
    dotted: str = ""
    reason: str = ""
    binding: Binding | None = None
    owner: tuple[str, str] | None = None
    home: tuple[str, str] | None = None
    fallback: tuple[str, str] | None = None  # (module, name) bound again by ``except ImportError``
    defined: str = ""  # a library name where the library defines it (the digest graph's leaf)
    stop: bool = False  # ``defined`` is a function, class or value: attributes are its own


def _own_value(target: Target, module: str, name: str) -> Target:
    """A value binding that is not the name's last one is a node of its own."""
    return target._replace(home=(module, name)) if target.kind == "value" else target


def library_target(dotted: str) -> Target:
    """Library name ``dotted`` bound in a project namespace, named where the library
    defines it; a function, class or value ends a chain (:mod:`.libnames`)."""
    found = canonical(dotted)
    if found.kind == "path":
        return Target("external", dotted=dotted)
    return Target("external", dotted=dotted, defined=found.dotted, stop=found.kind in ("def", "value"))


def unresolved(reason: str) -> Target:
    return Target("unresolved", reason=reason)


ASSUME_INSTALLED = "FLYDEPS_ASSUME_INSTALLED"


def installed(top: str) -> bool:
    """True when top-level module ``top`` is a library: importable here (stdlib, builtin,
    an installed distribution) or named in ``FLYDEPS_ASSUME_INSTALLED`` (comma-separated:
    analysing a kernel repository on a machine without FlyDSL)."""
    return top in assumed_installed() or _importable(top)


def assumed_installed() -> frozenset[str]:
    return frozenset(settings.names(ASSUME_INSTALLED))


@functools.lru_cache(maxsize=4096)
def _importable(top: str) -> bool:
    """Found with ``importlib.util.find_spec``, which imports nothing for a top-level name."""
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


Loader = Callable[[str], "LoadedModule | None"]


class Index:
    """Name resolution over the project's modules, loading each on first use."""

    def __init__(self, project: Project, loader: Loader) -> None:
        self.project = project
        self._load = loader
        self._mro: dict[tuple[str, str], tuple[Target, ...]] = {}
        self._modules: dict[str, Target] = {}
        self._globals: dict[tuple[str, str], Target] = {}
        self.tags: dict[tuple[str, str], frozenset[str]] = {}  # role tags, filled by resolve
        self._patches: dict[tuple[str, str, str], list[tuple[str, ValueBinding]]] = {}
        self._patched_modules: set[str] = set()  # modules whose patches are in ``_patches``
        self._lazy: dict[tuple[str, str], list[Target]] = {}  # PEP 562 alternatives, by (module, name)
        # Defs and classes another module's decorator registers, by the (module, name) it fills.
        self._registered: dict[tuple[str, str], list[Target]] = {}
        self._registering_modules: set[str] = set()  # modules whose decorators were read
        # Absolute imports of modules that are neither project modules nor installed:
        # module -> (path, line) of the first import (reported as diagnostics).
        self.missing: dict[str, tuple[str, int]] = {}

    def module(self, name: str) -> LoadedModule | None:
        return self._load(name)

    # -- module scope ----------------------------------------------------------------
    def lookup(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Target | None:
        """What ``name`` means at module level in ``module``; None if not bound there."""
        key = (module, name)
        if key in seen:
            return unresolved(f"import cycle through {module}.{name}")
        if len(seen) > MAX_CHAIN:
            return unresolved(f"re-export chain longer than {MAX_CHAIN} at {module}.{name}")
        seen = seen | {key}
        loaded = self.module(module)
        if loaded is None:
            return None
        binding = loaded.scope.get(name)
        if binding is not None:
            bound = self._later_star(loaded, name, seen) or self.binding_target(loaded, name, binding, seen)
            bound = _at_home(bound, module, name)
            more = name in loaded.fallbacks or name in loaded.alternatives
            return bound._replace(fallback=(module, name)) if more else bound
        found = self._star_lookup(loaded, name, seen)
        if found is not None:
            return _at_home(found, module, name)
        if loaded.file.is_package and self.project.find(f"{module}.{name}") is not None:
            return Target("module", module=f"{module}.{name}")
        return self._module_getattr(loaded, name, seen)

    def _later_star(self, loaded: LoadedModule, name: str, seen: frozenset) -> Target | None:
        """``def f`` then ``from x import *``: the star import wins where ``x`` (a project
        module: a library's names are not known) provides ``f``."""
        count = loaded.star_after.get(name)
        if count is None:
            return None
        for star in reversed(loaded.summary.star_imports[count:]):
            base = resolve_relative(loaded.name, loaded.file.is_package, star.module, star.level)
            found = self._from_star(loaded, star, name, seen, False) if base and self.module(base) else None
            if found is not None:
                return found
        return None

    def _module_getattr(self, loaded: LoadedModule, name: str, seen: frozenset) -> Target | None:
        """PEP 562: a name the module does not bind comes from its ``__getattr__``: the
        function, and (as alternatives) what it may return: the names its imports bind and
        ``name`` in every project module the file names as a string (its tables)."""
        hook = loaded.scope.get("__getattr__")
        if not isinstance(hook, DefBinding) or name in _BUILTINS or name in _MODULE_ATTRIBUTES:
            return None
        found = []
        for imp in loaded.summary.lazy:
            base = resolve_relative(loaded.name, loaded.file.is_package, imp.module, imp.level)
            if base is not None and base != loaded.name and self.module(base) is not None:
                target = self.lookup(base, imp.name or name, seen)
                found.extend([target] if target is not None and target.kind != "unresolved" else [])
        self._lazy[(loaded.name, name)] = found
        return Target("def", module=loaded.name, qualname=hook.qualname, fallback=(loaded.name, name))

    def _star_lookup(
        self, loaded: LoadedModule, name: str, seen: frozenset, *, attribute: bool = False
    ) -> Target | None:
        """``name`` from the module's ``from x import *`` statements, last one first. A
        library or compiled source's names are unknown: it is assumed to provide ``name``,
        except builtin names read as globals (``len`` stays the builtin); as an attribute
        (``os.open``) it does provide them."""
        for star in reversed(loaded.summary.star_imports):
            found = self._from_star(loaded, star, name, seen, attribute)
            if found is not None:
                return found
        return None

    def _from_star(
        self, loaded: LoadedModule, star: ImportBinding, name: str, seen: frozenset, attribute: bool
    ) -> Target | None:
        base = resolve_relative(loaded.name, loaded.file.is_package, star.module, star.level)
        if base is None:
            return None
        source = self.module(base)
        if source is None:
            outside = star.level == 0 or self.project.is_extension(base)
            claim = outside and (attribute or name not in _BUILTINS)
            return library_target(f"{base}.{name}") if claim else None
        if source.summary.all_names is not None:
            return self.lookup(base, name, seen) if name in source.summary.all_names else None
        # No __all__: every public name of its namespace, including its own star imports.
        return None if name.startswith("_") else self.lookup(base, name, seen)

    def binding_target(
        self, loaded: LoadedModule, name: str, binding: Binding, seen: frozenset = frozenset()
    ) -> Target:
        """The target of one binding in ``loaded``'s module scope (or a class body)."""
        if isinstance(binding, DefBinding):
            return Target("def", module=loaded.name, qualname=binding.qualname)
        if isinstance(binding, ClassBinding):
            return Target("class", module=loaded.name, qualname=binding.qualname)
        if isinstance(binding, ImportBinding):
            return self.import_target(loaded, binding, seen)
        if isinstance(binding, ValueBinding) and binding.refs[:1] and binding.refs[0][0] == "alias":
            text = binding.refs[0][1]
            head, *rest = text.split(".")
            if head == name:  # ``TimeoutError = TimeoutError``: the name as it was before (stars, builtins)
                before = self._star_lookup(loaded, head, seen) or self._builtin(head)
                return self.follow(before, tuple(rest), head, seen)[0]
            found = self.resolve_dotted(loaded.name, text, seen)[0]
            return library_target(found.dotted) if found.kind == "external" and not found.stop else found
        return Target("value", module=loaded.name, qualname=name, binding=binding)

    @staticmethod
    def _builtin(name: str) -> Target:
        if name in _BUILTINS:
            return Target("builtin", dotted=f"builtins.{name}")
        return unresolved("name is not defined")

    def import_target(self, loaded: LoadedModule, imp: ImportBinding, seen: frozenset = frozenset()) -> Target:
        """What an import statement binds."""
        base = resolve_relative(
            loaded.name, loaded.file.is_package, imp.module if imp.name else imp.bound_module, imp.level
        )
        if base is None:
            return unresolved(f"relative import beyond the top-level package in {loaded.name}")
        if not imp.name:
            return self._installed_or_missing(loaded, imp, self.module_target(base))
        sub = f"{base}.{imp.name}"
        # ``from . import env`` in a package's own __init__: the submodule, not the binding itself.
        if self.module(base) is not None and base != loaded.name:
            found = self.lookup(base, imp.name, seen)
            if found is not None:
                return found
        if self.project.find(sub) is not None or (self.module(base) is None and self.project.is_namespace(sub)):
            return Target("module", module=sub)
        if self.project.is_extension(sub) or self.project.is_extension(base):
            return Target("external", dotted=sub)  # compiled code inside the project: a leaf
        if self.module(base) is not None or imp.level:
            return unresolved(f"module {base} has no name {imp.name}")
        found = self._installed_or_missing(loaded, imp, Target("external", dotted=sub))
        return library_target(sub) if found.kind == "external" else found

    def _installed_or_missing(self, loaded: LoadedModule, imp: ImportBinding, target: Target) -> Target:
        """An absolute import of a library must name an installed one: anything else is
        probably a project package outside the roots (a src layout) and must not pass as a
        library leaf."""
        top = target.dotted.partition(".")[0]
        if target.kind != "external" or imp.level or installed(top) or self.project.in_library_root(top):
            return target
        if top not in loaded.summary.optional_imports:  # ``try: import x / except ImportError``
            self.missing.setdefault(top, (loaded.file.path, imp.line or 1))
        return unresolved(
            f"{top} is neither a module of the project (roots: {', '.join(self.project.roots)}) nor installed"
        )

    def module_target(self, name: str) -> Target:
        found = self._modules.get(name)
        if found is None:
            project = self.project
            is_project = not project.is_extension(name) and (
                project.find(name) is not None or project.is_namespace(name)
            )
            found = self._modules[name] = (
                Target("module", module=name) if is_project else Target("external", dotted=name)
            )
        return found

    # -- attributes and dotted names -------------------------------------------------
    def attr(self, target: Target, name: str, seen: frozenset = frozenset()) -> Target | None:
        """``target.name``; None when the chain stops (an attribute of a function or value)."""
        if target.kind == "module":
            loaded = self.module(target.module)
            found = self.lookup(target.module, name, seen) if loaded else None
            if found is None and self.project.find(f"{target.module}.{name}") is not None:
                return Target("module", module=f"{target.module}.{name}")
            if found is None and loaded is not None:
                found = self._star_lookup(loaded, name, seen, attribute=True)
            return found or unresolved(f"module {target.module} has no attribute {name}")
        if target.kind in ("external", "builtin"):
            return None if target.stop else Target("external", dotted=f"{target.defined or target.dotted}.{name}")
        if target.kind == "class":
            return self.member(target, name, seen=seen)
        return None

    def resolve_dotted(self, module: str, text: str, seen: frozenset = frozenset()) -> tuple[Target, str]:
        """Resolve ``a.b.c`` at module level; returns the target and the consumed text."""
        head, *rest = text.split(".")
        target = self.global_name(module, head, seen)
        return self.follow(target, tuple(rest), head, seen)

    def follow(
        self, target: Target, attrs: tuple[str, ...], label: str, seen: frozenset = frozenset()
    ) -> tuple[Target, str]:
        for name in attrs:
            nxt = self.attr(target, name, seen)
            if nxt is None:
                break
            target, label = nxt, f"{label}.{name}"
            if target.kind == "unresolved":
                break
        return target, label

    def global_name(self, module: str, name: str, seen: frozenset = frozenset()) -> Target:
        """A global read: module scope, then builtins, else unresolved (memoized: every
        function of a module reads the same few globals)."""
        if seen:
            return self._global_name(module, name, seen)
        key = (module, name)
        found = self._globals.get(key)
        if found is None:
            found = self._globals[key] = self._global_name(module, name, seen)
        return found

    def _global_name(self, module: str, name: str, seen: frozenset) -> Target:
        found = self.lookup(module, name, seen)
        if found is not None:
            return found
        if name in _MODULE_ATTRIBUTES:
            return Target("value", module=module, qualname=name, binding=LocalBinding(0, "the import system"))
        return self._builtin(name)

    def fallback_target(self, module: str, name: str) -> Target | None:
        """What the ``except ImportError`` handler of ``module`` binds to ``name`` (only)."""
        loaded = self.module(module)
        binding = loaded.fallbacks.get(name) if loaded else None
        if loaded is None or binding is None:
            return None
        return _own_value(
            _at_home(self.binding_target(loaded, name, binding), module, name), module, f"{name}#fallback"
        )

    def fallback_targets(self, module: str, name: str) -> list[tuple[Target, str]]:
        """(target, label suffix) of what else ``module``'s ``name`` may be: the
        ``except ImportError`` handler's binding (``fallback``), the other bindings and
        statements that may decide its value (``alternative``, see ``FileSummary``), what a
        PEP 562 ``__getattr__`` may return. A value gets a node of its own (``name#alt.N``)."""
        loaded = self.module(module)
        if loaded is None:
            return []
        fallback = self.fallback_target(module, name)
        out: list[tuple[Target, str]] = [(fallback, "fallback")] if fallback is not None else []
        for n, other in enumerate(loaded.alternatives.get(name, ())):
            target = _at_home(self.binding_target(loaded, name, other), module, name)
            out.append((_own_value(target, module, f"{name}#alt.{n}"), "alternative"))
        out.extend((t, "alternative") for t in self._lazy.get((module, name), ()))
        out.extend((t, "alternative") for t in self.registrations_of(module, name))
        return out

    def registrations_of(self, module: str, name: str) -> list[Target]:
        """What fills ``module``'s ``name`` through a function of ``module`` that stores into
        it: the module-level defs and classes of the other loaded modules that function
        decorates (``@register_reducer("sum")`` imported from the registry module), and the
        module-level calls of it in any loaded module (``add("prod", partial(f, acc="f32"))``:
        the call statement, with what it reads)."""
        self.module(module)
        for loaded in list(getattr(self._load, "loaded", {}).values()):
            if loaded is None or loaded.name in self._registering_modules:
                continue
            self._registering_modules.add(loaded.name)
            decorated = [("def", c.qualname, c.decorators) for c in loaded.summary.codes if not c.parent]
            decorated += [("class", c.qualname, c.decorators) for c in loaded.summary.classes if "." not in c.qualname]
            for kind, qual, decorators in decorated:
                for text in decorators:
                    registered = Target(kind, module=loaded.name, qualname=qual)
                    self._register(loaded.name, text, registered, other_module=True)
            for text, call in loaded.summary.calls:  # ``add("prod", partial(f, ...))`` at module level
                statement = Target("value", module=loaded.name, qualname=f"{text}#call.{call.line}", binding=call)
                self._register(loaded.name, text, statement, other_module=False)
        return self._registered.get((module, name), [])

    def _register(self, module: str, callee: str, registered: Target, *, other_module: bool) -> None:
        """``registered`` (a decorated def or class, or a call statement) is a binding of every
        module-level name that ``callee`` (resolved in ``module``) or a function inside it
        stores into; a decorator of the module itself is handled with its other bindings."""
        hook = self.resolve_dotted(module, callee)[0] if callee else unresolved("")
        home = self.module(hook.module) if hook.kind == "def" else None
        if home is None or (other_module and hook.module == module):
            return
        inner = hook.qualname + ".<locals>."
        for filled, bindings in home.alternatives.items():
            writers = [b.qualname for b in bindings if isinstance(b, DefBinding)]
            if any(q == hook.qualname or q.startswith(inner) for q in writers):
                self._registered.setdefault((home.name, filled), []).append(registered)

    def patches_of(self, module: str, cls_qual: str, attr: str) -> list[tuple[str, ValueBinding]]:
        """``Cls.attr = value`` statements (in any loaded module) that patch class
        ``module:cls_qual`` after its creation: (module of the statement, value)."""
        self._load_patches(module)
        return self._patches.get((module, cls_qual, attr), [])

    def class_patches(self, module: str, cls_qual: str) -> list[tuple[str, str, ValueBinding]]:
        """Every patch of class ``module:cls_qual``: (attribute, module of the statement, value)."""
        self._load_patches(module)
        return [
            (attr, where, value)
            for (m, q, attr), found in self._patches.items()
            if (m, q) == (module, cls_qual)
            for where, value in found
        ]

    def _load_patches(self, module: str) -> None:
        self.module(module)
        for loaded in list(getattr(self._load, "loaded", {}).values()):
            if loaded is None or loaded.name in self._patched_modules:
                continue
            self._patched_modules.add(loaded.name)
            for text, name, value in loaded.summary.patches:
                cls = self.resolve_dotted(loaded.name, text)[0]
                if cls.kind == "class":
                    self._patches.setdefault((cls.module, cls.qualname, name), []).append((loaded.name, value))

    # -- classes ---------------------------------------------------------------------
    def class_info(self, target: Target) -> ClassInfo | None:
        loaded = self.module(target.module)
        return loaded.classes.get(target.qualname) if loaded else None

    def bases(self, target: Target) -> list[Target]:
        info = self.class_info(target)
        if info is None:
            return []
        out = []
        loaded = self.module(target.module)
        earlier = dict(info.base_scope)
        for text in info.bases:
            head, *rest = text.split(".")
            if head in earlier and loaded is not None:
                base = self.follow(self.binding_target(loaded, head, earlier[head]), tuple(rest), head)[0]
            elif head == target.qualname.rpartition(".")[2] and loaded is not None:  # from a star import
                star = self._star_lookup(loaded, head, frozenset()) or unresolved(f"base {head} is the class itself")
                base = self.follow(star, tuple(rest), head)[0]
            else:
                base = self.resolve_dotted(target.module, text)[0] if text else unresolved("computed base class")
            if not (base.kind == "builtin" and base.dotted == "builtins.object"):
                out.append(base)
        return out

    def mro(self, target: Target, depth: int = 0) -> tuple[Target, ...]:
        """C3 linearization; project classes are expanded, other bases end the chain (as do
        hierarchies deeper than ``MAX_CHAIN``)."""
        key = (target.module, target.qualname)
        if key in self._mro:
            return self._mro[key]
        self._mro[key] = (target,)  # cycle guard: a class inheriting from itself
        if depth > MAX_CHAIN:
            return self._mro[key]
        seqs = [list(self.mro(b, depth + 1)) if b.kind == "class" else [b] for b in self.bases(target)]
        self._mro[key] = (target, *_c3_merge([*seqs, self.bases(target)]))
        return self._mro[key]

    def member(
        self, cls: Target, name: str, owner: tuple[str, str] | None = None, seen: frozenset = frozenset()
    ) -> Target | None:
        """``name`` looked up along ``cls``'s MRO, with ``owner`` (default ``cls``) attached.

        A class-body alias (``__radd__ = __add__``) resolves in the class body first, as
        Python's class scope does, then at module level; alias cycles end as unresolved."""
        owner = owner or (cls.module, cls.qualname)
        key = (f"{cls.module}:{cls.qualname}", name)
        if key in seen or len(seen) > MAX_CHAIN:
            return unresolved(f"alias cycle through {cls.qualname}.{name}")
        for klass in self.mro(cls):
            loaded = self.module(klass.module) if klass.kind == "class" else None
            binding = loaded.class_body(klass.qualname).get(name) if loaded else None
            if binding is None:
                continue
            found = self._member_binding(klass, name, binding, owner, seen | {key})
            return found._replace(owner=owner)
        return None

    def _member_binding(
        self, klass: Target, name: str, binding: Binding, owner: tuple[str, str], seen: frozenset
    ) -> Target:
        loaded = self.module(klass.module)
        assert loaded is not None
        if isinstance(binding, ValueBinding) and binding.refs[:1] and binding.refs[0][0] == "alias":
            head, *rest = binding.refs[0][1].split(".")
            if head in loaded.class_body(klass.qualname):
                inner = self.member(klass, head, owner, seen) or unresolved(f"{klass.qualname}.{head} not found")
                return self.follow(inner, tuple(rest), head, seen)[0]
            return self.resolve_dotted(klass.module, binding.refs[0][1], seen)[0]
        return self.binding_target(loaded, f"{klass.qualname}.{name}", binding, seen)


def _at_home(target: Target, module: str, name: str) -> Target:
    """A value read through namespace entry ``module.name`` (re-export, alias, star import)."""
    if target.kind == "value" and (target.module, target.qualname) != (module, name):
        return target._replace(home=(module, name))
    return target


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
