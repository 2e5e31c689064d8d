"""Library state queries a trace reads: one declared table, each query a derived read of the trace.

Contract
--------
A kernel's trace may branch on process state a library keeps and answers through its API:
torch's default dtype (the accumulator a kernel picks), its deterministic-algorithms switch
(no atomics in a reduction), the TF32 and reduced-precision switches and the float32 matmul
precision (which MFMA a GEMM uses), cuDNN's flags, a device's properties (the compute units
a persistent kernel sizes its grid by). The answer is baked into the IR, and none of it is
in the environment, the key or the graph (the graph reaches ``torch`` as a library leaf).
:data:`QUERIES` lists them; each is one family of derived reads of
:mod:`flydeps.observe.environ` (``=torch.get_default_dtype()``,
``=torch.backends.cudnn.deterministic``, ``=torch.cuda.get_device_properties:0``) whose
value is what the query answered (``repr``; a query that raised, its exception), so:

* a read is noted exactly when a recording thread asks the query (kernel code, a helper,
  library Python code called by the trace): a *call* query through a wrapper of the
  library function, an *attribute* query through a descriptor on the settings object's
  class (wrapping the class's own descriptor, or its ``__getattr__`` for the name);
  both call the original and return its answer unchanged, and note nothing outside a
  recording (one check of the thread's recordings);
* a launcher's entry re-evaluates it on every hit (the switches move without any trace of
  it in ``os.environ``: ``fixed=False``; device properties are fixed for the process, and
  remembered until the environment changes), and a persistent row by its name in any
  process that imported this module; rebuild reasons and strict-AOT misses name it
  (``torch.get_default_dtype() (read by the trace): torch.float32 -> torch.float64``).

The standard library's logging is a row too: ``Logger.isEnabledFor(level)`` and
``Logger.getEffectiveLevel()``, methods whose answer depends on the logger's level, its
parents' and ``logging.disable`` (all of it in the one answer, asked again).
Their reads name the logger (``=logging.Logger.isEnabledFor:10:pkg.mod``, evaluated with the
logger ``logging.getLogger`` gives by that name; a logger it does not give back, or a level
that is not an int, is a read never answered again: rebuilt, never served). Calls made by
logging's own emitting methods (``log.debug(...)``: whether a record is emitted) are not
reads (:attr:`StateQuery.read_by`). A method query's wrapper sits on its class only while
some thread records (:func:`flydeps.observe.environ.while_recording`): outside recordings every
log call runs logging's own method. This table lives here, not in flydeps, because
installing it patches other libraries' objects process-wide, which the launcher opts into
and a library imported by arbitrary code (flydeps) must not do on import; it imports
nothing but the standard library and :mod:`flydeps.observe.environ`.

:func:`install` (from :func:`flydsl_runtime.launch.hooks.ensure_hooks`) installs every query whose
owner is imported (torch is, with FlyDSL), once; a module imported earlier that bound a call
query under its own name (``from torch import get_default_dtype``) is rebound to the
wrapper (:func:`rebind_early_imports`). Not seen: a bound method taken before a recording
(``enabled = log.isEnabledFor``), a subclass overriding a method query, a logger's ``level``
attribute read directly; state consumed inside the library's C++
(a tensor created during the trace takes the default dtype without asking this API), a
query reached under another name, and a library's data attributes (``__version__``: the
graph keys those by value). docs/guarantees.md lists them with the verify-mode workaround.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any, Literal

from flydeps.observe.environ import RECORDING, derive_family, note_derived, paused, recording_in_thread, while_recording

__all__ = ["QUERIES", "StateQuery", "add", "evaluate", "failure", "install", "query_of", "rebind_early_imports"]


def failure(error: BaseException) -> str:
    """A query that raised, as the read's value (never what an answer describes)."""
    return f"\0raised {type(error).__qualname__}: {error}"


def _shown(value: str | None) -> str:
    """A ``repr`` answer shown as it is (``torch.float32``, ``True``), a failure by its error."""
    return (value or "").lstrip("\0")


@dataclass(frozen=True)
class StateQuery:
    """One library query a trace may ask. ``owner`` is a module or an object reached from one
    by attributes (``torch.backends.cuda.matmul``), ``attribute`` the function or flag in it.
    ``fixed``: its answer is fixed for the process (re-checks remember it until the
    environment changes). A call query with arguments gives ``member`` (the call's
    arguments -> the member's suffix, None when the call names nothing machine-dependent)
    and ``arguments`` (a suffix -> the call's arguments, to evaluate a member by name);
    ``describe`` turns an answer into the read's value; ``what``, ``show`` and ``differ``
    word it in messages (:func:`flydeps.observe.environ.derive_family`). ``read_by``: given the
    frame that called the query, whether that call is a read at all (None: every call is;
    a logger's ``debug()`` asking its own level decides only whether a record is emitted)."""

    owner: str
    attribute: str
    kind: Literal["call", "attribute"]
    why: str
    fixed: bool = False
    member: Callable[..., str | None] | None = None
    arguments: Callable[[str], tuple] | None = None
    describe: Callable[[Any], str] = repr
    what: Callable[[str], str] | None = None
    show: Callable[[str | None], str] | None = _shown
    differ: Callable[[str | None, str | None], str | None] | None = None
    read_by: Callable[[FrameType | None], bool] | None = None

    @property
    def path(self) -> str:
        return f"{self.owner}.{self.attribute}"

    @property
    def prefix(self) -> str:
        """The name of its read (a no-argument query), or what its members' names start with."""
        if self.kind == "attribute":
            return f"={self.path}"
        return f"={self.path}:" if self.member is not None else f"={self.path}()"

    def name_of(self, args: tuple, kwargs: dict) -> str | None:
        """The read a call with these arguments is (None: a call naming no state)."""
        if self.member is not None:
            suffix = self.member(*args, **kwargs)
            return None if suffix is None else self.prefix + suffix
        return self.prefix if not args and not kwargs else None


def _call(owner: str, attribute: str, why: str) -> StateQuery:
    return StateQuery(owner, attribute, "call", why)


def _flag(owner: str, attribute: str, why: str) -> StateQuery:
    return StateQuery(owner, attribute, "attribute", why)


_TF32 = "which MFMA/accumulation a GEMM or convolution kernel emits"
# The table (devprops adds torch.cuda.get_device_properties, a fixed query with an argument).
QUERIES: list[StateQuery] = [
    _call("torch", "get_default_dtype", "the dtype a kernel allocates or accumulates in"),
    _call("torch", "are_deterministic_algorithms_enabled", "a deterministic reduction instead of atomics"),
    _call("torch", "is_deterministic_algorithms_warn_only_enabled", "the same choice, warn-only"),
    _call("torch", "get_float32_matmul_precision", _TF32),
    _flag("torch.backends.cuda.matmul", "allow_tf32", _TF32),
    _flag("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction", "split-K reduction precision"),
    _flag("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction", "split-K reduction precision"),
    _flag("torch.backends.cudnn", "allow_tf32", _TF32),
    _flag("torch.backends.cudnn", "deterministic", "a deterministic algorithm instead of atomics"),
    _flag("torch.backends.cudnn", "benchmark", "whether a kernel autotunes at trace time"),
    _flag("torch.backends.cudnn", "enabled", "whether a kernel defers to cuDNN"),
]


# --- a logger's level: the standard library's, asked of a logger found by its name -------

# Logger methods that ask the logger's level only to decide whether a record is emitted.
_EMITTERS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"})


def _asked_by_caller(frame: FrameType | None) -> bool:
    """False for a level asked by logging's own emitting methods (``log.debug(...)``, a
    ``LoggerAdapter``'s): only the caller that branches on the answer reads it."""
    while frame is not None and frame.f_globals.get("__name__") in ("logging", __name__):  # ours: a wrapper
        if frame.f_code.co_name in _EMITTERS:
            return False
        frame = frame.f_back
    return True


def _logger_named(name: str) -> logging.Logger:
    """The logger ``logging.getLogger(name)`` gives (without its lock when it exists)."""
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else logging.getLogger(name)


def _by_name(logger: object) -> str:
    """A logger's name when ``logging.getLogger`` gives it back by that name, else a marker
    (``!``) whose read is never answered again (a logger made by hand: never served)."""
    name = getattr(logger, "name", None)
    if type(name) is str and (logging.Logger.manager.loggerDict.get(name) is logger or logger is logging.root):
        return ":" + name
    return f"!{name!r}"


def _enabled_member(logger: object, level: object) -> str:
    return (f"{level}" if type(level) is int else f"!{level!r}") + _by_name(logger)


def _enabled_arguments(suffix: str) -> tuple:
    level, sep, name = suffix.partition(":")
    if not sep or not level.lstrip("-").isdigit():
        raise LookupError(f"not a logger that logging.getLogger names, or not an int level: {suffix!r}")
    return (_logger_named(name), int(level))


def _level_arguments(suffix: str) -> tuple:
    if suffix[:1] != ":":
        raise LookupError(f"not a logger that logging.getLogger names: {suffix[1:]!r}")
    return (_logger_named(suffix[1:]),)


def _enabled_what(name: str) -> str:
    level, sep, logger = name.partition(".isEnabledFor:")[2].partition(":")
    return f"logging.getLogger({logger!r}).isEnabledFor({level})" if sep else f"a logger's isEnabledFor ({name})"


def _level_what(name: str) -> str:
    suffix = name.partition(".getEffectiveLevel:")[2]
    return (
        f"logging.getLogger({suffix[1:]!r}).getEffectiveLevel()" if suffix[:1] == ":" else f"a logger's level ({name})"
    )


def _logger_query(attribute: str, member: Callable[..., str], arguments: Callable[[str], tuple]) -> StateQuery:
    why = "whether a helper takes its debug branch (parent levels and logging.disable included)"
    what = _enabled_what if attribute == "isEnabledFor" else _level_what
    return StateQuery(
        "logging.Logger",
        attribute,
        "call",
        why,
        member=member,
        arguments=arguments,
        what=what,
        read_by=_asked_by_caller,
    )


QUERIES += [
    _logger_query("isEnabledFor", _enabled_member, _enabled_arguments),
    _logger_query("getEffectiveLevel", _by_name, _level_arguments),
]
# path -> the library's own function or getter (the original, never a wrapper of ours)
_originals: dict[str, Callable[..., Any]] = {}
_registered: set[str] = set()


def query_of(name: str) -> StateQuery | None:
    """The query whose read ``name`` is."""
    for query in QUERIES:
        if name == query.prefix or (query.member is not None and name.startswith(query.prefix)):
            return query
    return None


def _resolve(path: str) -> object | None:
    """The object at a dotted ``path``: the longest prefix in ``sys.modules``, then attributes
    read through namespace dicts (no ``__getattr__`` of a lazy module runs). None when that
    module is not imported in this process."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        found: object | None = sys.modules.get(".".join(parts[:cut]))
        if found is None:
            continue
        for part in parts[cut:]:
            try:
                namespace = object.__getattribute__(found, "__dict__")
            except AttributeError:
                return None
            found = namespace.get(part) if type(namespace) is dict else None
            if found is None:
                return None
        return found
    return None


def evaluate(name: str) -> str | None:
    """What the query behind read ``name`` answers now (any process that imported this)."""
    query = query_of(name)
    if query is None:
        return "\0not a state query of this flydsl_runtime"
    return _answer(query, query.path, query.prefix, name)


def _answer(query: StateQuery, path: str, prefix: str, name: str) -> str | None:
    """The read ``name`` of ``query`` now (re-checked on every hit: kept to a few calls)."""
    original = _originals.get(path) or _unwrapped_original(query)
    if original is None:
        return f"\0{query.owner} is not imported in this process"
    try:
        if query.arguments is None:
            return query.describe(original())
        return query.describe(original(*query.arguments(name[len(prefix) :])))
    except Exception as error:  # noqa: BLE001 - the failure is the answer
        return failure(error)


def _unwrapped_original(query: StateQuery) -> Callable[..., Any] | None:
    """The query's original where :func:`install` has not run for it (its owner was imported
    later): the function itself, or a getter of the attribute."""
    owner = _resolve(query.owner)
    if owner is None:
        return None
    if query.kind == "call":
        found = getattr(owner, query.attribute, None)
        return getattr(found, "__flydeps_original__", found)
    return functools.partial(getattr, owner, query.attribute)


def _what(query: StateQuery) -> Callable[[str], str]:
    if query.what is not None:
        return query.what
    return lambda _name: query.path + ("()" if query.kind == "call" else "")


def _noted(query: StateQuery, name: str | None, ask: Callable[[], Any]) -> Any:
    """``ask()`` (the original query) with its answer, or its failure, noted as read ``name``."""
    try:
        with paused():  # keyed by the answer, not by what the library reads to give it
            answer = ask()
    except Exception as error:
        if name is not None:
            note_derived(name, failure(error))
        raise
    if name is not None:
        note_derived(name, query.describe(answer))
    return answer


def _call_wrapper(query: StateQuery, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def asked(*args: Any, **kwargs: Any) -> Any:
        if not RECORDING or not recording_in_thread():
            return original(*args, **kwargs)
        if query.read_by is not None and not query.read_by(sys._getframe(1)):
            return original(*args, **kwargs)
        return _noted(query, query.name_of(args, kwargs), functools.partial(original, *args, **kwargs))

    asked.__flydeps_original__ = original  # type: ignore[attr-defined]
    return asked


class _NotedAttribute:
    """A settings object's flag, read through its original getter; a read by a recording
    thread is noted (:class:`StateQuery`). Installed on the object's class."""

    def __init__(self, query: StateQuery, get: Callable[[object], Any], original: object) -> None:
        self._query, self._get, self.__flydeps_original__ = query, get, original

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if not RECORDING or not recording_in_thread():
            return self._get(obj)
        return _noted(self._query, self._query.prefix, functools.partial(self._get, obj))


class _NotedDataAttribute(_NotedAttribute):
    """:class:`_NotedAttribute` for a data descriptor (its assignments go to the original)."""

    def __set__(self, obj: object, value: object) -> None:
        self.__flydeps_original__.__set__(obj, value)  # type: ignore[attr-defined]


def _install_attribute(query: StateQuery, owner: object) -> None:
    cls = type(owner)
    current = cls.__dict__.get(query.attribute)
    if isinstance(current, _NotedAttribute):
        return
    noted: _NotedAttribute
    if current is not None and hasattr(type(current), "__get__"):
        get = functools.partial(_descriptor_get, current)
        noted = (_NotedDataAttribute if hasattr(type(current), "__set__") else _NotedAttribute)(query, get, current)
        original = functools.partial(type(current).__get__, current, owner, cls)  # no frame of ours
    elif current is not None or "__getattr__" not in cls.__dict__:
        return  # a plain class value, or nothing that computes it: no query to observe
    else:  # answered by the class's __getattr__ (torch's cuBLASModule)
        computed = cls.__dict__["__getattr__"]
        noted = _NotedAttribute(query, functools.partial(_computed_get, computed, query.attribute), computed)
        original = functools.partial(computed, owner, query.attribute)
    _originals[query.path] = original
    setattr(cls, query.attribute, noted)


def _descriptor_get(descriptor: Any, obj: object) -> Any:
    return descriptor.__get__(obj, type(obj))


def _computed_get(getattr_: Callable[[object, str], Any], attribute: str, obj: object) -> Any:
    return getattr_(obj, attribute)


def _install_call(query: StateQuery, owner: object) -> tuple[object, object, str] | None:
    """Observe a call query; for a module's function, ``(original, wrapper, name)``: the
    caller rebinds the modules that imported it early (:func:`_rebind_early_imports`)."""
    namespace = object.__getattribute__(owner, "__dict__")
    current = namespace.get(query.attribute)
    if current is None or hasattr(current, "__flydeps_original__"):
        return None
    _originals[query.path] = current
    wrapper = _call_wrapper(query, current)
    if isinstance(owner, type):  # a method (logging.Logger.isEnabledFor): no module binds it by name
        while_recording(functools.partial(_switch_method, owner, query.attribute, current, wrapper))
        return None
    namespace[query.attribute] = wrapper
    return current, wrapper, query.attribute


def _switch_method(owner: type, attribute: str, original: object, wrapper: object, on: bool) -> None:
    """A method query's wrapper on its class only while some thread records (every log call
    asks its logger's level: outside a recording they call logging's own method); a method
    someone else put there is left alone."""
    current, wanted = (original, wrapper) if on else (wrapper, original)
    if owner.__dict__.get(attribute) is current:
        setattr(owner, attribute, wanted)


def _register(query: StateQuery) -> None:
    if query.prefix in _registered:
        return
    _registered.add(query.prefix)
    derive_family(query.prefix, _compute(query), _what(query), query.show, query.differ, fixed=query.fixed)


def _compute(query: StateQuery) -> Callable[[str], str | None]:
    """A member's value now, by its name: :func:`_answer`, with the common case (no
    arguments, observed here) written out, since an entry asks it on every hit."""
    path, prefix, describe = query.path, query.prefix, query.describe
    if query.arguments is not None:
        return functools.partial(_answer, query, path, prefix)

    def compute(name: str) -> str | None:
        original = _originals.get(path)
        if original is None:
            return _answer(query, path, prefix, name)
        try:
            return describe(original())
        except Exception as error:  # noqa: BLE001 - the failure is the answer
            return failure(error)

    return compute


def add(query: StateQuery) -> None:
    """Add a query to the table (a consumer's own: :mod:`.devprops`) and register its reads."""
    if query_of(query.prefix) is None:
        QUERIES.append(query)
    _register(query)


def install() -> list[str]:
    """Register every query's reads, and observe each whose owner is imported (once).
    Returns the paths observed by this call."""
    done = []
    swaps: list[tuple[object, object, str]] = []
    try:
        for query in QUERIES:
            _register(query)
            owner = _resolve(query.owner)
            if owner is None or query.path in _originals:
                continue
            if query.kind == "call":
                swap = _install_call(query, owner)
                if swap is not None:
                    swaps.append(swap)
            else:
                _install_attribute(query, owner)
            if query.path in _originals:
                done.append(query.path)
    finally:  # a wrapper put in place is never left unseen by a module that imported early
        if swaps:
            _rebind_early_imports(swaps)  # one pass over sys.modules for all of them
    return done


def rebind_early_imports(original: object, wrapper: object, name: str) -> list[str]:
    """Modules that bound the library's function under its own ``name`` (``from torch.cuda
    import get_device_properties``) before :func:`install` hold the original: they are
    rebound to ``wrapper`` (the same answers; their reads are then seen). Read and written
    through the namespace dicts of module objects only (no ``__getattr__`` runs, and an object
    a library put in ``sys.modules`` is not read); another name for it is left as it is.
    Returns the modules rebound."""
    return _rebind_early_imports([(original, wrapper, name)])[0]


def _rebind_early_imports(swaps: list[tuple[object, object, str]]) -> list[list[str]]:
    """:func:`rebind_early_imports` of each ``(original, wrapper, name)``, in one pass over
    ``sys.modules`` (~2,000 modules in a process holding torch: one pass per query was
    ~0.5 ms each of importing the facade). The modules rebound, per swap."""
    rebound: list[list[str]] = [[] for _ in swaps]
    for module_name, module in list(sys.modules.items()):
        if not issubclass(type(module), ModuleType):  # an object a library put there: not read
            continue
        namespace = object.__getattribute__(module, "__dict__")  # no __getattr__ of a lazy module
        if type(namespace) is not dict:
            continue
        for (original, wrapper, name), modules in zip(swaps, rebound):
            if namespace.get(name) is original:
                namespace[name] = wrapper
                modules.append(module_name)
    return rebound
