"""Family ``procstate``: process and thread state read through library APIs.

``contextvars.ContextVar`` values (set in this thread; read from another thread, whose
context is fresh), ``threading.local`` attributes, torch's global settings (default dtype,
deterministic algorithms, the TF32 switches, float32 matmul precision) and a library's
``__version__`` that a kernel branches on (FlyDSL's ``conv3d_autotune`` reads
``flydsl.__version__``; here the installed helper library ``kerneldeco``'s).
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "procstate"

PRELUDE = """
LOG = logging.getLogger("fam_kernels.rmsnorm")
PRECISION = contextvars.ContextVar("precision", default="fast")
TRACE_TAG = contextvars.ContextVar("trace_tag", default="")
TLS = threading.local()
TLS.mode = "precise"  # set by the importing thread


def by_precision(v):
    if PRECISION.get() == "precise":
        return v / 3.0
    return v * (1.0 / 3.0)


def by_thread(v):
    if getattr(TLS, "mode", "fast") == "precise":
        return v / 3.0
    return v * (1.0 / 3.0)


def by_torch(v):
    if torch.get_default_dtype() == torch.float64:
        return v * 0.5
    if torch.are_deterministic_algorithms_enabled():
        return v * 0.125
    if torch.backends.cuda.matmul.allow_tf32:
        return v * 0.375
    if torch.get_float32_matmul_precision() != "highest":
        return v * 0.625
    return v * 0.25


def by_logging(v):
    if LOG.isEnabledFor(logging.DEBUG):
        return v * 0.5
    return v * 0.25


def by_cudnn(v):
    if torch.backends.cudnn.deterministic:
        return v * 0.5
    return v * 0.25


def by_cwd(v):
    if Path("fam_tuning.flag").exists():  # relative to the working directory
        return v * 0.5
    return v * 0.25


def by_env_copy(v):
    if dict(os.environ).get("FAM_MODE", "fast") == "precise":
        return v * 0.5
    return v * 0.25


def by_version(v):
    if tuple(int(p) for p in kerneldeco.__version__.split(".")[:2]) >= (0, 2):
        return v * 0.5
    return v * 0.25
"""

IMPORTS = (
    "import contextvars\nimport logging\nimport os\nimport threading\nfrom pathlib import Path\n\n"
    "import kerneldeco\nimport torch"
)
VERSION = 'import kerneldeco\nsaved_version = kerneldeco.__version__\nkerneldeco.__version__ = "0.2.0"\n'


def _case(name: str, post: str, mutate: str, reaches: bool | None, what: str, **kw: object) -> Case:
    return Case(FAMILY, name, rmsnorm(post, imports=IMPORTS, prelude=PRELUDE), mutate, reaches, what, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    _case(
        "contextvar_set",
        "by_precision(v)",
        'mod("kern").PRECISION.set("precise")',
        True,
        "a ContextVar the trace reads set in the calling thread",
    ),
    _case(
        "contextvar_fresh_thread",
        "by_precision(v)",
        'in_thread(lambda: call("call from a new thread (fresh context)", reaches=True))',
        None,
        "a ContextVar set in the main thread; the launcher called from a new thread, whose context is fresh",
        setup='mod("kern").PRECISION.set("precise")',
        new_process=False,
    ),
    _case(
        "thread_local_other_thread",
        "by_thread(v)",
        'in_thread(lambda: call("call from another thread", reaches=True))',
        None,
        "a threading.local attribute set by the importing thread; the launcher called from another thread",
        new_process=False,
    ),
    _case(
        "thread_local_set",
        "by_thread(v)",
        'mod("kern").TLS.mode = "fast"',
        True,
        "a threading.local attribute the trace reads set in the calling thread",
    ),
    _case(
        "torch_default_dtype",
        "by_torch(v)",
        "torch.set_default_dtype(torch.float64)",
        True,
        "torch.set_default_dtype(float64) (the tensors passed stay float32)",
    ),
    _case(
        "torch_deterministic",
        "by_torch(v)",
        "torch.use_deterministic_algorithms(True)",
        True,
        "torch.use_deterministic_algorithms(True)",
    ),
    _case(
        "torch_tf32_switch",
        "by_torch(v)",
        "torch.backends.cuda.matmul.allow_tf32 = True",
        True,
        "torch.backends.cuda.matmul.allow_tf32 = True",
    ),
    _case(
        "torch_matmul_precision",
        "by_torch(v)",
        'torch.set_float32_matmul_precision("high")',
        True,
        "torch.set_float32_matmul_precision('high')",
    ),
    _case(
        "library_version",
        "by_version(v)",
        VERSION,
        True,
        "the __version__ of a library the kernel branches on (kerneldeco 0.1.0 -> 0.2.0)",
        restore="kerneldeco.__version__ = saved_version",
    ),
    _case(
        "logger_level",
        "by_logging(v)",
        'logging.getLogger("fam_kernels.rmsnorm").setLevel(logging.DEBUG)',
        True,
        "a logger's level the kernel checks (isEnabledFor(DEBUG)) set",
        restore='logging.getLogger("fam_kernels.rmsnorm").setLevel(logging.NOTSET)',
    ),
    _case(
        "logger_parent_level",
        "by_logging(v)",
        'logging.getLogger("fam_kernels").setLevel(logging.DEBUG)',
        True,
        "the PARENT logger's level set (the kernel's logger inherits it)",
        restore='logging.getLogger("fam_kernels").setLevel(logging.NOTSET)',
    ),
    _case(
        "cudnn_deterministic",
        "by_cudnn(v)",
        "torch.backends.cudnn.deterministic = True",
        True,
        "torch.backends.cudnn.deterministic = True",
        restore="torch.backends.cudnn.deterministic = False",
    ),
    _case(
        "contextvar_reset_undo",
        "by_precision(v)",
        'token = mod("kern").PRECISION.set("precise")\n'
        'call("with precise set", reaches=True)\n'
        'mod("kern").PRECISION.reset(token)\n',
        False,
        "a ContextVar set, called, then reset(token): back to the original entry",
        new_process=False,
        expect_hit=True,
    ),
    _case(
        "working_directory",
        "by_cwd(v)",
        'saved_cwd = os.getcwd()\nos.chdir(pkg.root)\n(pkg.root / "fam_tuning.flag").write_text("1")\n',
        True,
        "os.chdir into a directory holding the relative file a helper checks",
        restore="os.chdir(saved_cwd)",
    ),
    _case(
        "env_read_through_copy",
        "by_env_copy(v)",
        'os.environ["FAM_MODE"] = "precise"',
        True,
        "an environment variable read through dict(os.environ) (a copy) set",
    ),
    _case(
        "neutral_torch_seed",
        "by_torch(v)",
        "torch.manual_seed(1234)",
        False,
        "NEUTRAL: torch.manual_seed (RNG state the trace never reads)",
    ),
    _case(
        "neutral_contextvar_unread",
        "by_precision(v)",
        'mod("kern").TRACE_TAG.set("bench")',
        False,
        "NEUTRAL: a ContextVar the trace never reads set",
    ),
    _case(
        "neutral_contextvar_equal",
        "by_precision(v)",
        'mod("kern").PRECISION.set("fast")',
        False,
        "NEUTRAL: the ContextVar set to the value it already had (its default)",
    ),
)
