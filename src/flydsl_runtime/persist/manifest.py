"""AOT manifests: the specializations a real run called, as JSON lines an AOT build reads.

Contract
--------
A manifest is a UTF-8 text file of JSON objects, one per line, keys sorted: first the header
``{"schema": "flydeps.aot-manifest/1"}``, then one object per specialization (the fields
and the value forms are in docs/cli.md, "AOT manifests"):

* ``launcher``: the launcher by import path, ``package.module:qualname``
  (``kernels.realworld.softmax:softmax_w4``; a bound method of a module-level instance
  ``kernels.realworld.quant:QUANT.launch``);
* ``args`` (a list) and ``kwargs`` (an object): the call's arguments, each in a JSON form
  that rebuilds a value FlyDSL keys the same way (:func:`encode_value`, :func:`decode_value`:
  a tensor by dtype, shape and strides, rebuilt as a one-element CPU placeholder with the
  same strides; scalars by type and value; ``None``; tuples; dtypes and classes by name).
  Parameters left at their default (or given a value whose signature is the default's)
  are omitted;
* ``hints``: the compile hints of the call's key; ``env``: the code-generation variables
  that were set (FlyDSL's list, :data:`flydsl_runtime.trace.envkey.CODEGEN_ENV_VARS`);
  ``environ``: what the trace read of ``os.environ`` (``null``: unset);
* or, for a call that cannot be named across processes, ``unnamed``: why (with
  ``launcher`` the launcher's qualified name): an argument of a type defined in a function,
  a launcher or bound instance no module-level name holds, a value with no JSON form.

Recording (``FLYDEPS_RECORD=PATH``): :func:`note_call` is called by the launcher the first
time a process stores an entry for a key (a trace, or a row served by the persistent
index); with the variable unset it returns after one settings read. Each specialization is
one line: deduplicated within a process and across processes appending to the same file
(an exclusive ``flock`` on the file while it is read from where this process last read it
and the line is appended with one ``O_APPEND`` write). Nothing here raises into a call: a
file that is not a manifest, or cannot be written, is one WARNING per process on the
``flydsl_runtime`` logger naming it, and recording stops there.

Reading (:func:`read`, :func:`check`): every line is checked against the schema; a bad line
is a :class:`Problem` naming ``file:line`` and what is wrong. :func:`merge` unions manifests
(first occurrence order, duplicates dropped) into one file, written whole (a temporary file
renamed over it) and only when no input has a bad line. :func:`resolve` imports a
launcher's import path; :func:`applied` sets an entry's environment and hints around a call.
Below the launcher (never imports it): the launcher is read through its attributes.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import math
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flydeps import settings
from flydeps.errors import FlydepsError

__all__ = [
    "DEFAULT_NAME",
    "SCHEMA",
    "ManifestEntry",
    "ManifestError",
    "MergeResult",
    "Problem",
    "applied",
    "check",
    "decode_value",
    "encode_value",
    "merge",
    "note_call",
    "read",
    "resolve",
]

log = logging.getLogger("flydsl_runtime")

SCHEMA = "flydeps.aot-manifest/1"
DEFAULT_NAME = "aot-manifest.jsonl"
HEADER = json.dumps({"schema": SCHEMA}, sort_keys=True)

_FIELDS = ("launcher", "args", "kwargs", "hints", "env", "environ", "unnamed")
_TAGS = ("tensor", "tuple", "float", "dtype", "type")
# Variables an AOT build sets itself for every call: never taken from an entry's ``environ``.
BUILD_CONTROLLED = ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION", "COMPILE_ONLY")
_BUILD_PREFIXES = ("FLYDEPS_", "FLYDSL_RUNTIME_")


# --- errors and entries --------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One bad line of a manifest (``line`` 0: the file as a whole)."""

    path: str
    line: int
    what: str

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.what}" if self.line else f"{self.path}: {self.what}"


class ManifestError(FlydepsError, ValueError):
    """A manifest that cannot be used: ``problems`` names each bad line (``file:line: what``)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        more = f" (and {len(self.problems) - 1} more bad lines)" if len(self.problems) > 1 else ""
        super().__init__(f"{self.problems[0].text()}{more}" if self.problems else "bad manifest")


@dataclass(frozen=True, eq=False)
class ManifestEntry:
    """One specialization line: ``data`` as parsed (checked), where it was read, and its
    ``identity``, the canonical line (two entries are one specialization when equal)."""

    data: Mapping[str, Any]
    path: str
    line: int
    identity: str

    @property
    def launcher(self) -> str:
        return str(self.data["launcher"])

    @property
    def unnamed(self) -> str | None:
        why = self.data.get("unnamed")
        return str(why) if why is not None else None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def field(self, name: str) -> Any:
        """``args``, ``kwargs``, ``hints``, ``env``, ``environ``: their value, or empty."""
        return self.data.get(name, [] if name == "args" else {})


def canonical(obj: Mapping[str, Any]) -> str:
    """The one line an object is written as: keys sorted, ``, ``/``: `` separators, UTF-8."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)


# --- values: the JSON forms ----------------------------------------------------------


class _NoForm(Exception):
    """A value with no JSON form in a manifest."""


def _type_path(tp: type) -> str:
    qualname, module = getattr(tp, "__qualname__", ""), getattr(tp, "__module__", "")
    if not qualname or not module or "<locals>" in qualname:
        raise _NoForm(f"type {tp!r} is defined inside a function (<locals>), which no other process can import")
    if module in ("__main__", "__mp_main__"):
        raise _NoForm(f"type {qualname} is defined in the __main__ script, which no other process imports")
    return f"{module}:{qualname}"


def encode_value(value: object) -> object:
    """The JSON form of one value (module docstring): a tensor by its own shape and strides
    (a recorded argument is keyed as FlyDSL keys it instead, :func:`_form`); raises
    ``_NoForm`` naming the value's type when it has none."""
    tp = type(value)
    if value is None or tp in (bool, int, str):
        return value
    if isinstance(value, float) and tp is float:
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if tp is tuple:
        return {"tuple": [encode_value(v) for v in value]}  # type: ignore[attr-defined]
    if tp is list:
        return [encode_value(v) for v in value]  # type: ignore[attr-defined]
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            return {"tensor": {"dtype": dtype, "shape": list(value.shape), "stride": list(value.stride())}}
        if tp is torch.dtype:
            return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, type):
        return {"type": _type_path(value)}
    if "<locals>" in getattr(tp, "__qualname__", ""):
        raise _NoForm(f"its type {tp.__module__}.{tp.__qualname__} is defined inside a function (<locals>)")
    raise _NoForm(f"a value of type {tp.__module__}.{tp.__qualname__} has no manifest form")


def _check_value(value: object) -> str | None:
    """What is wrong with a value's JSON form (None: nothing)."""
    if value is None or type(value) in (bool, int, float, str):
        return None
    if type(value) is list:
        return next((why for v in value if (why := _check_value(v)) is not None), None)
    if type(value) is not dict:
        return f"{value!r} is not a value form"
    if len(value) != 1 or next(iter(value)) not in _TAGS:
        return f"{canonical(value)} is not a value form (an object has one key: {', '.join(_TAGS)})"
    ((tag, body),) = value.items()
    if tag == "tuple":
        return _check_value(body) if type(body) is list else f"tuple is {canonical(value)}, not a list"
    if tag == "float":
        return None if body in ("nan", "inf", "-inf") else f"float is {body!r}, not 'nan', 'inf' or '-inf'"
    if tag == "dtype":
        return None if type(body) is str and body.isidentifier() else f"dtype {body!r} is not a torch dtype name"
    if tag == "type":
        return None if _is_import_path(body) else f"type {body!r} is not 'module:qualname'"
    if type(body) is not dict or set(body) != {"dtype", "shape", "stride"}:
        return f"tensor {canonical(value)} is not {{dtype, shape, stride}}"
    dtype, shape, stride = body["dtype"], body["shape"], body["stride"]
    if type(dtype) is not str or not dtype.isidentifier():
        return f"tensor dtype {dtype!r} is not a torch dtype name such as 'float16'"
    ints = all(type(s) is int for s in (*shape, *stride)) if type(shape) is list and type(stride) is list else False
    if not ints or len(shape) != len(stride) or any(s < -1 for s in (*shape, *stride)):
        return f"tensor shape {shape!r} and stride {stride!r} are not two lists of as many integers >= -1"
    return None


def decode_value(value: object) -> object:
    """The Python value of a (checked) JSON form: a tensor is a CPU placeholder of the
    recorded dtype, one element per axis (none for an empty one) and the recorded strides, a
    dynamic one (``-1``) as 2 (FlyDSL keys a raw tensor by its dtype and which axis has the
    unit stride; its sizes are dynamic). Raises ValueError for a dtype or type that does
    not exist here."""
    if type(value) is list:
        return [decode_value(v) for v in value]
    if type(value) is not dict:
        return value
    ((tag, body),) = value.items()
    if tag == "tuple":
        return tuple(decode_value(v) for v in body)
    if tag == "float":
        return float(body)
    if tag == "type":
        found = resolve(body)
        if not isinstance(found, type):
            raise ValueError(f"type {body!r} names a {type(found).__name__}, not a class")
        return found
    import torch

    name = body if tag == "dtype" else body["dtype"]
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype {name!r} is not a torch dtype (torch {torch.__version__})")
    if tag == "dtype":
        return dtype
    shape = [1 if size else 0 for size in body["shape"]]
    strides = [2 if stride == -1 else stride for stride in body["stride"]]
    return torch.empty_strided(shape, strides, dtype=dtype, device="cpu")


# --- checking lines ------------------------------------------------------------------


def _is_import_path(text: object) -> bool:
    """``package.module:qual.name``: dotted identifiers on both sides of one colon."""
    if type(text) is not str or text.count(":") != 1:
        return False
    module, qual = text.split(":")
    return all(p.isidentifier() for p in (*module.split("."), *qual.split(".")))


def _check_entry(obj: object) -> str | None:
    """What is wrong with one specialization line's object (None: nothing)."""
    if type(obj) is not dict:
        return f"a line is a JSON object, not {type(obj).__name__}"
    unknown = sorted(set(obj) - set(_FIELDS))
    if unknown:
        return f"unknown field {unknown[0]!r} (fields: {', '.join(_FIELDS)})"
    if "schema" in obj:
        return "a second header"
    launcher, unnamed = obj.get("launcher"), obj.get("unnamed")
    if type(launcher) is not str or not launcher:
        return "launcher is missing or not a string"
    if unnamed is not None:
        if type(unnamed) is not str or not unnamed:
            return "unnamed is not a non-empty string (the reason the call has no cross-process name)"
    elif not _is_import_path(launcher):
        return f"launcher {launcher!r} is not an import path 'package.module:qualname'"
    args = obj.get("args", [])
    if type(args) is not list:
        return f"args is {type(args).__name__}, not a list"
    for i, value in enumerate(args):
        if (why := _check_value(value)) is not None:
            return f"args[{i}]: {why}"
    for name in ("kwargs", "hints"):
        table = obj.get(name, {})
        if type(table) is not dict:
            return f"{name} is {type(table).__name__}, not an object"
        for key, value in table.items():
            if name == "kwargs" and not key.isidentifier():
                return f"kwargs key {key!r} is not a parameter name"
            if (why := _check_value(value)) is not None:
                return f"{name}.{key}: {why}"
    for name, nullable in (("env", False), ("environ", True)):
        table = obj.get(name, {})
        if type(table) is not dict:
            return f"{name} is {type(table).__name__}, not an object"
        for key, value in table.items():
            if type(value) is not str and not (nullable and value is None):
                return f"{name}.{key} is {value!r}, not a string{' or null' if nullable else ''}"
    return None


def check(path: Path | str) -> tuple[list[ManifestEntry], list[Problem]]:
    """Every entry of the manifest ``path`` and every problem (``file:line: what``)."""
    shown = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [Problem(shown, 0, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return [], [Problem(shown, 0, f"cannot be read ({exc.strerror or exc})")]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return [], [Problem(shown, 0, f"is empty (a manifest starts with the header {HEADER})")]
    entries: list[ManifestEntry] = []
    problems: list[Problem] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(shown, number, f"not JSON ({exc.msg} at column {exc.colno})"))
            continue
        if number == 1:
            schema = obj.get("schema") if type(obj) is dict else None
            if schema != SCHEMA:
                what = f"schema {schema!r}" if schema is not None else "no header"
                problems.append(Problem(shown, 1, f"{what}: the first line must be {HEADER}"))
                if schema is not None:
                    break  # another schema: its lines are not checked against this one
            continue
        why = _check_entry(obj)
        if why is not None:
            problems.append(Problem(shown, number, why))
            continue
        entries.append(ManifestEntry(obj, shown, number, canonical(obj)))
    return entries, problems


def read(path: Path | str) -> list[ManifestEntry]:
    """The manifest's entries, duplicates dropped (first kept); :class:`ManifestError` naming
    every bad line."""
    entries, problems = check(path)
    if problems:
        raise ManifestError(problems)
    seen: set[str] = set()
    return [e for e in entries if not (e.identity in seen or seen.add(e.identity))]  # type: ignore[func-returns-value]


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge` wrote: ``entries`` lines after the header, ``duplicates`` dropped."""

    out: str
    entries: int
    duplicates: int
    unnamed: int


def merge(paths: Sequence[Path | str], out: Path | str) -> MergeResult:
    """The union of ``paths`` into ``out``: first-occurrence order, duplicates dropped,
    written whole (a temporary file renamed over ``out``, which may be one of the inputs).
    :class:`ManifestError` naming every bad line of every input, and nothing written."""
    entries: list[ManifestEntry] = []
    problems: list[Problem] = []
    for path in paths:
        found, bad = check(path)
        entries += found
        problems += bad
    if problems:
        raise ManifestError(problems)
    seen: dict[str, ManifestEntry] = {}
    for entry in entries:
        seen.setdefault(entry.identity, entry)
    target = Path(out)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(HEADER + "\n")
            handle.writelines(identity + "\n" for identity in seen)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise ManifestError([Problem(str(out), 0, f"cannot be written ({exc.strerror or exc})")]) from None
    unnamed = sum(1 for e in seen.values() if e.unnamed is not None)
    return MergeResult(str(out), len(seen), len(entries) - len(seen), unnamed)


# --- building from an entry ----------------------------------------------------------


def resolve(path: str) -> Any:
    """The object an import path ``package.module:qual.name`` names, its module imported.
    ValueError saying what cannot be found."""
    module_name, _sep, qual = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or what the module raises while imported
        raise ValueError(
            f"{path}: module {module_name} cannot be imported ({type(exc).__name__}: {exc}); run the build "
            "where the recording process's modules import (PYTHONPATH)"
        ) from None
    for i, part in enumerate(qual.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = ".".join([module_name, *qual.split(".")[:i]])
            raise ValueError(
                f"{path}: {where} has no attribute {part!r} (renamed or removed since it was recorded?)"
            ) from None
    return obj


@contextlib.contextmanager
def applied(entry: ManifestEntry) -> Iterator[None]:
    """The entry's environment while the block runs, put back afterwards: the code-generation
    variables exactly as recorded (those not recorded unset), the variables the trace read
    set or unset as it read them (except what a build sets itself: the arch selectors,
    ``COMPILE_ONLY``, ``FLYDEPS_*``, ``FLYDSL_RUNTIME_*``); and its compile hints as
    FlyDSL's thread-local overlay."""
    from flydsl.compiler.kernel_function import CompilationContext

    from ..trace.envkey import CODEGEN_ENV_VARS

    wanted: dict[str, str | None] = {name: None for name in CODEGEN_ENV_VARS}
    wanted.update(entry.field("env"))
    for name, value in entry.field("environ").items():
        if name not in BUILD_CONTROLLED and not name.startswith(_BUILD_PREFIXES):
            wanted[name] = value
    saved = {name: os.environ.get(name) for name in wanted}
    hints = {name: decode_value(value) for name, value in entry.field("hints").items()}
    try:
        _set_environ(wanted)
        with CompilationContext.compile_hints(hints) if hints else contextlib.nullcontext():
            yield
    finally:
        _set_environ(saved)


def _set_environ(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# --- recording -----------------------------------------------------------------------

# The libraries whose modules never hold a user's launcher (skipped when looking for one).
_LIBRARIES = ("torch", "flydsl", "flydsl_runtime", "flydeps", "numpy", "_", "importlib", "encodings")


def _importable(name: str, module: object) -> bool:
    spec = getattr(module, "__spec__", None)
    return name not in ("__main__", "__mp_main__") and spec is not None and getattr(spec, "name", None) == name


def _candidates(first: str) -> Iterator[tuple[str, object]]:
    """Modules that may hold a launcher or an instance: ``first`` (where it was defined),
    then every other imported module by name, libraries and ``__main__`` excepted."""
    modules = dict(sys.modules)
    if first in modules and _importable(first, modules[first]):
        yield first, modules[first]
    for name in sorted(modules):
        if name != first and not name.startswith(_LIBRARIES) and _importable(name, modules[name]):
            yield name, modules[name]


def _attribute_of(cls: type, launcher: object) -> str | None:
    """The attribute name under which ``cls`` (or a base) holds ``launcher``."""
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if value is launcher:
                return name
    return None


def _holder(target: object, first: str) -> str | None:
    """``module:name`` of a module-level name bound to ``target``, or None."""
    for module_name, module in _candidates(first):
        try:
            found = next((n for n, v in list(vars(module).items()) if v is target and n.isidentifier()), None)
        except TypeError:  # a module object without a namespace dict
            continue
        if found is not None:
            return f"{module_name}:{found}"
    return None


def _loaded(path: str) -> object:
    """What ``path`` names among the modules already imported (no import)."""
    module_name, _sep, qual = path.partition(":")
    obj: object = sys.modules[module_name]
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def import_path(launcher: Any, bound_self: object) -> tuple[str | None, str]:
    """``(package.module:qualname, "")`` by which a new process reaches the call's launcher (a
    module-level name; for a bound call, the module-level instance and the launcher's
    attribute), checked by resolving it here; ``(None, why)`` when there is none."""
    name = getattr(launcher, "_name", type(launcher).__qualname__)
    if bound_self is None:
        path = _holder(launcher, getattr(launcher.jit_function.func, "__module__", ""))
        if path is None:
            return None, (
                f"launcher {name} is not reachable by import path (no module-level name holds it: made inside a "
                "function or a factory); assign it to a module-level name, or list it in an AOT SPEC"
            )
        return (path, "") if _loaded(path) is launcher else (None, f"{path} does not resolve to the launcher")
    cls = type(bound_self)
    attribute = _attribute_of(cls, launcher)
    if attribute is None:
        return None, f"launcher {name} is bound to a {cls.__qualname__} instance whose class does not hold it"
    if "<locals>" in cls.__qualname__:
        return None, f"the bound instance's class {cls.__module__}.{cls.__qualname__} is defined inside a function"
    holder = _holder(bound_self, cls.__module__)
    if holder is None:
        return None, (
            f"the {cls.__module__}.{cls.__qualname__} instance {name} is bound to is not reachable by import path "
            "(no module-level name holds it)"
        )
    path = f"{holder}.{attribute}"
    got = _loaded(path)
    func = getattr(got, "func", None)
    held: tuple = getattr(got, "args", ())
    if getattr(func, "__self__", None) is launcher and len(held) == 1 and held[0] is bound_self:
        return path, ""
    return None, f"{path} does not resolve to the launcher bound to that instance"


def _arguments(launcher: Any, positional: tuple) -> tuple[list, dict] | str:
    """The call's ``(args, kwargs)`` forms, or why a part has none. Parameters at their
    default, or whose value signs as the default does, are left out."""
    signer, sig = launcher._signer, launcher.jit_function._sig
    params = list(sig.parameters.values())
    variadic = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if variadic:
        return f"the launcher takes *{variadic[0]}"
    signed = signer(positional)
    args: list = []
    kwargs: dict = {}
    for i, (param, value) in enumerate(zip(params, positional)):
        if param.default is not inspect.Parameter.empty:
            if value is param.default:
                continue
            try:
                if signer((*positional[:i], param.default, *positional[i + 1 :]))[i] == signed[i]:
                    continue
            except Exception:  # the default does not sign here: keep the value
                pass
        try:
            form = _form(signer, positional, signed, i, value)
        except _NoForm as why:
            return f"argument {param.name!r}: {why}"
        if param.default is inspect.Parameter.empty and param.kind is not param.KEYWORD_ONLY:
            args.append(form)
        else:
            kwargs[param.name] = form
    try:  # the forms must rebuild a call FlyDSL keys the same way
        rebuilt = launcher._bind(tuple(decode_value(a) for a in args), {k: decode_value(v) for k, v in kwargs.items()})
        again = signer(rebuilt)
    except Exception as exc:
        return f"the arguments' manifest forms do not rebuild the call ({type(exc).__name__}: {exc})"
    for name, before, after in zip(sig.parameters, signed, again):
        if before != after:
            return f"argument {name!r}: its manifest form signs {after!r}, the call signed {before!r}"
    return args, kwargs


def _form(signer: Any, positional: tuple, signed: tuple, i: int, value: object) -> object:
    """The JSON form of argument ``i`` as FlyDSL keys it, so that calls of one specialization
    give one line: a raw tensor by its signature's shape and strides (``-1``: dynamic), a
    runtime scalar whose value the signature does not hold as its type's zero."""
    torch = sys.modules.get("torch")
    sig = signed[i]
    if torch is not None and isinstance(value, torch.Tensor):
        if type(sig) is tuple and len(sig) == 6 and getattr(sig[0], "__name__", "") == "TorchTensorJitArg":
            dtype = str(value.dtype).removeprefix("torch.")
            return {"tensor": {"dtype": dtype, "shape": list(sig[4]), "stride": list(sig[5])}}
        return encode_value(value)
    tp = type(value)
    if tp in (bool, int, float) and value != tp():
        try:
            if signer((*positional[:i], tp(), *positional[i + 1 :]))[i] == sig:
                return tp()
        except Exception:  # the zero does not sign here: the value as it is
            pass
    return encode_value(value)


def _line(launcher: Any, bound_self: object, positional: tuple, entry: Any) -> str:
    """The manifest line of one call (a specialization, or an ``unnamed`` one)."""
    from flydeps.observe.environ import DERIVED, paused

    from ..trace.envkey import CODEGEN_ENV_VARS

    name = str(getattr(launcher, "_name", "?"))
    path, why = import_path(launcher, bound_self)
    if path is None:
        return canonical({"launcher": name, "unnamed": why})
    forms = _arguments(launcher, positional)
    if isinstance(forms, str):
        return canonical({"launcher": path, "unnamed": forms})
    args, kwargs = forms
    key = entry.key
    try:
        hints = {str(k): encode_value(v) for k, v in key[4]}
    except _NoForm as no_form:
        return canonical({"launcher": path, "unnamed": f"compile hints: {no_form}"})
    with paused():  # not a read of the user's build
        env = {n: os.environ[n] for n in CODEGEN_ENV_VARS if os.environ.get(n)}
    environ = {n: v for n, v in entry.env_reads.values if not n.startswith(DERIVED)}
    obj: dict[str, object] = {"launcher": path, "args": args}
    for field_name, table in (("kwargs", kwargs), ("hints", hints), ("env", env), ("environ", environ)):
        if table:
            obj[field_name] = table
    return canonical(obj)


class _Recorder:
    """Appends lines to one manifest file, each once across every process appending to it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: set[str] = set()
        self.offset = 0  # bytes of the file read into ``seen``
        self.failed = False

    def append(self, line: str) -> None:
        import fcntl

        if self.failed or line in self.seen:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor
            size = os.fstat(fd).st_size
            if size < self.offset:  # truncated or replaced since: read it all again
                self.seen.clear()
                self.offset = 0
            data = os.pread(fd, size - self.offset, self.offset) if size > self.offset else b""
            lines = data.split(b"\n")
            if self.offset == 0 and size:
                first = lines[0].decode("utf-8", "replace")
                if first != HEADER:
                    self.failed = True
                    log.warning(
                        "FLYDEPS_RECORD=%s: the file is not an AOT manifest (its first line is %.80r, not %s); "
                        "nothing is recorded: name a new file",
                        self.path,
                        first,
                        HEADER,
                    )
                    return
            complete = lines[:-1]  # a last line without its newline is not whole (a writer died)
            for raw in complete:
                with contextlib.suppress(ValueError):
                    obj = json.loads(raw)
                    if type(obj) is dict:
                        self.seen.add(canonical(obj))
            self.offset += sum(len(raw) + 1 for raw in complete)
            if line not in self.seen:
                out = (HEADER + "\n" if size == 0 else "\n" if lines[-1] else "") + line + "\n"
                encoded = out.encode("utf-8")
                written = os.write(fd, encoded)
                if written != len(encoded):
                    raise OSError(f"short write ({written} of {len(encoded)} bytes)")
                self.seen.add(line)
                self.offset = size + len(encoded)
        finally:
            os.close(fd)


_recorders: dict[str, _Recorder] = {}
_record_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _record_lock
    _record_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def note_call(launcher: Any, bound_self: object, positional: tuple, entry: Any) -> None:
    """Record a specialization this process stored an entry for (``entry``: its
    ``Entry``; ``positional``: the call's arguments in parameter order, defaults filled;
    ``bound_self``: the instance of a bound call or None) in ``FLYDEPS_RECORD``'s manifest.
    One settings read when the variable is unset. Never raises: a failure is one WARNING
    per file and process, and that file records nothing more."""
    target = settings.text("FLYDEPS_RECORD")
    if target is None:
        return
    path = os.path.abspath(target)
    with _record_lock:
        recorder = _recorders.get(path)
        if recorder is None:
            recorder = _recorders[path] = _Recorder(path)
        if recorder.failed:
            return
        try:
            recorder.append(_line(launcher, bound_self, positional, entry))
        except Exception as exc:
            recorder.failed = True
            log.warning(
                "FLYDEPS_RECORD=%s: cannot record %s (%s: %s); nothing more is recorded in this process",
                path,
                getattr(launcher, "_name", launcher),
                type(exc).__name__,
                exc,
            )
