"""The per-file summary: everything the resolver needs from one source file.

Contract: plain immutable records (``NamedTuple``s of strings, ints and tuples) produced by
:mod:`flydeps.static.extract` and stored by :mod:`flydeps.static.parse` in the parse cache
as JSON, in the form :data:`SUMMARY_SHAPE` declares (read back field by field, validated).
A summary depends only on the file's bytes and the Python version: never on its path, its
module name or any other file, so identical files share one cache entry. Relative imports
are therefore kept as written (``level`` + ``module``) and resolved later.

NamedTuples rather than dataclasses because a run after an edit rebuilds thousands of them
from the cache and tuples build several times faster; they are just as immutable.
"""

from __future__ import annotations

from typing import NamedTuple

from .store import Bool, Fixed, Int, Optional, Record, Seq, Str, Union

__all__ = [
    "SUMMARY_VERSION",
    "ClassBinding",
    "ClassInfo",
    "CodeInfo",
    "DefBinding",
    "Binding",
    "FileSummary",
    "ImportBinding",
    "LocalBinding",
    "ParamBinding",
    "Problem",
    "Ref",
    "SUMMARY_SHAPE",
    "ValueBinding",
]

# Bump when the shape or meaning of a summary changes: old cache entries are then ignored.
SUMMARY_VERSION = 11


class ImportBinding(NamedTuple):
    """``import a.b [as c]`` (``name`` empty) or ``from .a import b [as c]`` (``name`` = b).

    ``bound_module`` is the module a plain ``import a.b`` binds (``a``); for ``as`` forms it
    is the full module. ``level`` counts the leading dots of a relative import.
    """

    line: int
    module: str
    name: str
    level: int
    bound_module: str


class DefBinding(NamedTuple):
    """A ``def`` statement: ``qualname`` is the code object's qualified name (``#n`` if repeated)."""

    line: int
    qualname: str


class ClassBinding(NamedTuple):
    line: int
    qualname: str


class ValueBinding(NamedTuple):
    """An assignment. ``literal`` is True when ``digest`` is the runtime value digest of a
    literal; otherwise ``digest`` hashes the normalized expression. ``refs`` are the dotted
    names the expression reads, as (label, dotted) pairs in source order. Labels follow the
    runtime discovery's edge labels: ``alias`` (the value *is* that name), ``type`` and
    ``func`` (``functools.partial(func, ...)``), ``['key']`` / ``[0]`` (a dispatch table
    entry), '' (any other read). A partial's literal arguments are ``arg0``/keyword labels
    with the pseudo-name ``<value>:<digest>``; a lambda table entry is ``<lambda>@LINE``."""

    line: int
    digest: str
    literal: bool
    text: str
    refs: tuple[tuple[str, str], ...]


class ParamBinding(NamedTuple):
    """A function parameter (its value is only known at call time)."""

    line: int
    name: str


class LocalBinding(NamedTuple):
    """A local bound by something other than an assignment (``for``, ``with``, ``except``...)."""

    line: int
    how: str


Binding = ImportBinding | DefBinding | ClassBinding | ValueBinding | ParamBinding | LocalBinding

# A name read by code, as recorded by ``_bytecode.code_refs``: (scope, name, attrs).
Ref = tuple[str, str, tuple[str, ...]]


class CodeInfo(NamedTuple):
    """One function code object (``def`` or ``lambda``) of the file.

    Comprehensions and class bodies are folded into their enclosing code, as in
    ``_bytecode.code_refs``/``code_digest``. ``parent`` is the enclosing code's qualname
    ('' for the module or a class body). ``kind`` is ``function``, ``method`` or ``lambda``.
    ``nested`` are the function codes directly inside this one. ``decorators`` are dotted
    names as written (``flyc.kernel``, ``functools.lru_cache``), evaluated in the parent
    scope. ``defaults`` are (parameter, kind, payload) with kind ``ref`` (payload a dotted
    name), ``value`` (payload the literal's value digest) or ``expr`` (expression digest).
    ``self_name`` is the first positional parameter when it is ``self``/``cls`` (the
    runtime's rule). ``scope`` are the names the code binds. ``decorator_scope`` holds the
    earlier binding of the function's own name when a decorator reads it (``@v.setter``).
    ``annotations`` digests the parameter and return annotations as written (normalized by
    ``ast.unparse``): FlyDSL types arguments by them, and the enclosing code evaluates them.
    """

    qualname: str
    parent: str
    kind: str
    line: int
    digest: str
    refs: tuple[Ref, ...]
    nested: tuple[str, ...]
    decorators: tuple[str, ...]
    defaults: tuple[tuple[str, str, str], ...]
    self_name: str
    scope: tuple[tuple[str, Binding], ...]
    decorator_scope: tuple[tuple[str, Binding], ...] = ()
    annotations: str = ""  # digest of the annotation expressions as written, '' when none
    # (index, arguments) of each decorator written as a call (``@flyc.kernel(known_block_size=
    # [N, 1, 1])``): the arguments digested as written, with the names they read.
    decorator_args: tuple[tuple[int, ValueBinding], ...] = ()
    # (parameter, dotted name) read by a computed default (``off=_helper()``), evaluated
    # where the ``def`` stands.
    default_refs: tuple[tuple[str, str], ...] = ()


class ClassInfo(NamedTuple):
    """A class statement: bases and decorators as dotted names ('' where not a plain dotted
    name); ``body`` is what the class body binds, in order. ``digest`` is the runtime's class
    digest (qualname + snapshot of its non-code attributes) when the body holds only methods
    and literal values (no annotated fields, no decorators), else '' (the resolver then uses
    ``body_digest``: ``@fx.struct`` fields live in annotations).
    ``base_scope`` holds the earlier binding of a base name the class statement rebinds
    (``class ConstantOp(ConstantOp)`` refines an imported class of the same name)."""

    qualname: str
    line: int
    bases: tuple[str, ...]
    decorators: tuple[str, ...]
    body: tuple[tuple[str, Binding], ...]
    digest: str
    base_scope: tuple[tuple[str, Binding], ...] = ()
    body_digest: str = ""  # the body as written (fields, annotations, method signatures), no docstring
    # Dotted module-level names the class statement's values and keywords read
    # (``property(_getter)``, ``field(default_factory=helper)``, ``metaclass=Meta``).
    refs: tuple[str, ...] = ()
    keyword_refs: tuple[str, ...] = ()  # the part of ``refs`` the keywords read (``metaclass=Meta``)
    # Digest of the decorators and keywords as written ('' when there are none).
    head_digest: str = ""


class Problem(NamedTuple):
    """A diagnostic found while reading the file (path is attached by the caller)."""

    line: int
    message: str


class FileSummary(NamedTuple):
    content_digest: str
    lines: int
    scope: tuple[tuple[str, Binding], ...]
    all_names: tuple[str, ...] | None
    star_imports: tuple[ImportBinding, ...]
    imports: tuple[ImportBinding, ...]
    classes: tuple[ClassInfo, ...]
    codes: tuple[CodeInfo, ...]
    problems: tuple[Problem, ...]
    # ``try: from lib import f`` / ``except ImportError: def f``: the handler's module-level
    # binding of a name the ``try`` body bound (both are dependencies of a reader).
    fallbacks: tuple[tuple[str, Binding], ...] = ()
    # ``Cls.m = transform(Cls.m)`` at module level: (class name as written, attribute, value).
    patches: tuple[tuple[str, str, ValueBinding], ...] = ()
    # Top-level modules imported inside ``try`` blocks that handle ImportError: optional.
    optional_imports: tuple[str, ...] = ()
    # Module-level bindings that may be live besides the last one, and the statements and
    # functions that may decide a name's value (a branch condition, ``B *= 2``, ``T[k] = f``,
    # a function assigning ``global X`` or filling ``T``, a def a registering decorator
    # inserts): see :mod:`.moduleflow`. Several entries per name.
    alternatives: tuple[tuple[str, Binding], ...] = ()
    # (name, number of star imports before its last binding) when a later ``from x import *``
    # may rebind it.
    star_after: tuple[tuple[str, int], ...] = ()
    # PEP 562 ``__getattr__``: the modules (and names) it may return.
    lazy: tuple[ImportBinding, ...] = ()
    # Module-level calls of a function by name (``register("prod", partial(f, acc="f32"))``):
    # (the callee as written, the call statement); a registry the callee fills holds what the
    # call passes (:meth:`flydeps.static.symbols.Index.registrations_of`).
    calls: tuple[tuple[str, ValueBinding], ...] = ()


def _shape() -> Record:
    """How a :class:`FileSummary` is stored in the parse cache (validated on every read)."""
    value = Record(ValueBinding, Int, Str, Bool, Str, Seq(Fixed(Str, Str)))
    imported = Record(ImportBinding, Int, Str, Str, Int, Str)
    binding = Union(
        {
            "import": imported,
            "def": Record(DefBinding, Int, Str),
            "class": Record(ClassBinding, Int, Str),
            "value": value,
            "param": Record(ParamBinding, Int, Str),
            "local": Record(LocalBinding, Int, Str),
        }
    )
    scope = Seq(Fixed(Str, binding))
    code = Record(
        CodeInfo,
        *(Str, Str, Str, Int, Str),  # qualname, parent, kind, line, digest
        Seq(Fixed(Str, Str, Seq(Str))),  # refs
        *(Seq(Str), Seq(Str)),  # nested, decorators
        Seq(Fixed(Str, Str, Str)),  # defaults
        *(Str, scope, scope, Str),  # self_name, scope, decorator_scope, annotations
        Seq(Fixed(Int, value)),  # decorator_args
        Seq(Fixed(Str, Str)),  # default_refs
    )
    klass = Record(ClassInfo, Str, Int, Seq(Str), Seq(Str), scope, Str, scope, Str, Seq(Str), Seq(Str), Str)
    return Record(
        FileSummary,
        *(Str, Int, scope, Optional(Seq(Str)), Seq(imported), Seq(imported)),
        *(Seq(klass), Seq(code), Seq(Record(Problem, Int, Str))),
        *(scope, Seq(Fixed(Str, Str, value)), Seq(Str)),  # fallbacks, patches, optional_imports
        *(scope, Seq(Fixed(Str, Int)), Seq(imported)),  # alternatives, star_after, lazy
        Seq(Fixed(Str, value)),  # calls
    )


#: The stored form of a :class:`FileSummary`: ``SUMMARY_SHAPE.encode(summary)`` is JSON-able,
#: ``SUMMARY_SHAPE.decode(json)`` validates every field and rebuilds the records.
SUMMARY_SHAPE = _shape()
