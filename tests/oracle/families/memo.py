"""Family ``memo``: memoized readers the trace calls.

A user function under ``functools.lru_cache`` / ``functools.cache`` that reads the
environment, a tuning file or a module dict, called by the trace (kernel repositories memoize
``get_warp_size()``-like probes and tuning-table loads). The state changes and the user
calls ``cache_clear()`` (directly, or and then calls the reader once more), also when the
reader was warmed at import, before the first trace; and the state changes without a
``cache_clear()`` (the memo still answers the old value in this process; a new process reads
the new one). A hand-written memo dict is the same shape without ``functools``. The
launcher's own trace is the first to call a reader (``Case.cold``) unless the case warms it
at import.
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "memo"

ENV_READER = """

@functools.lru_cache(maxsize=None)
def vec_scale():
    return float(os.environ.get("FAM_VEC_SCALE", "0.5"))
"""

FILE_READER = """
TUNING = Path(__file__).resolve().parent / "tuning.json"


@functools.cache
def tuned():
    return json.loads(TUNING.read_text())
"""

DICT_READER = """
SETTINGS = {"scale": 0.5}


@functools.lru_cache(maxsize=8)
def setting(name):
    return SETTINGS[name]
"""

METHOD_READER = """

class Tiles:
    ROW_SCALE = 0.5

    @functools.lru_cache(maxsize=None)
    def scale(self, width):
        return self.ROW_SCALE * width / 4


TILES = Tiles()
"""

MANUAL_MEMO = """
_SCALE_CACHE = {}


def cached_scale():
    if "scale" not in _SCALE_CACHE:
        _SCALE_CACHE["scale"] = float(os.environ.get("FAM_VEC_SCALE", "0.5"))
    return _SCALE_CACHE["scale"]
"""

OTHER = '''\
"""A second launcher whose trace calls the same memoized reader."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import kern


@flyc.kernel
def quant_kernel(x: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    out[tid] = fx.math.clampf(x[tid] * kern.READER(), -448.0, 448.0)


@flyc.jit
def launch(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32):
    quant_kernel(x, out).launch(grid=(rows // 64, 1, 1), block=(64, 1, 1))
'''
OTHER_FIRST = 'mod("other").launch(*make_args())  # another launcher traces first: it fills the memo\n'

WARM_ENV = "\n_WARM = vec_scale()  # warmed at import, before any trace\n"
WARM_FILE = "\n_WARM = tuned()  # warmed at import, before any trace\n"
IMPORTS = "import functools\nimport json\nimport os\nfrom pathlib import Path"
SET_ENV = 'os.environ["FAM_VEC_SCALE"] = "0.25"\n'
CLEAR_ENV = 'mod("kern").vec_scale.cache_clear()\n'


def _case(name: str, prelude: str, post: str, mutate: str, reaches: bool | None, what: str, **kw: object) -> Case:
    extra = {"tuning.json": '{"scale": 0.5}\n', "other.py": OTHER}
    files = rmsnorm(post, imports=IMPORTS, prelude=prelude, extra=extra)
    # cold: the launcher's own trace is the first to call the reader (no plain trace before it)
    return Case(FAMILY, name, files, mutate, reaches, what, cold=True, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    _case(
        "env_reader_cleared",
        ENV_READER,
        "v * vec_scale()",
        SET_ENV + CLEAR_ENV,
        True,
        "lru_cache env reader first read by the trace; env changed, cache_clear()",
    ),
    _case(
        "env_reader_warmed_cleared",
        ENV_READER + WARM_ENV,
        "v * vec_scale()",
        SET_ENV + CLEAR_ENV,
        True,
        "lru_cache env reader warmed at import; env changed, cache_clear()",
    ),
    _case(
        "env_reader_cleared_then_called",
        ENV_READER,
        "v * vec_scale()",
        SET_ENV + CLEAR_ENV + 'mod("kern").vec_scale()\n',
        True,
        "lru_cache env reader; env changed, cache_clear(), the user calls it once more",
    ),
    _case(
        "env_reader_warmed_cleared_then_called",
        ENV_READER + WARM_ENV,
        "v * vec_scale()",
        SET_ENV + CLEAR_ENV + 'mod("kern").vec_scale()\n',
        True,
        "lru_cache env reader warmed at import; env changed, cache_clear(), called once more",
    ),
    _case(
        "env_changed_not_cleared",
        ENV_READER,
        "v * vec_scale()",
        SET_ENV,
        None,
        "lru_cache env reader; env changed without cache_clear() (memo keeps the old value here)",
        startup="",
    ),
    _case(
        "file_reader_cleared",
        FILE_READER,
        'v * tuned()["scale"]',
        'pkg.edit("tuning.json", "0.5", "0.25")\nmod("kern").tuned.cache_clear()\n',
        True,
        "functools.cache tuning-file reader; the file edited, cache_clear()",
        startup="",
    ),
    _case(
        "file_reader_warmed_cleared",
        FILE_READER + WARM_FILE,
        'v * tuned()["scale"]',
        'pkg.edit("tuning.json", "0.5", "0.25")\nmod("kern").tuned.cache_clear()\n',
        True,
        "functools.cache tuning-file reader warmed at import; the file edited, cache_clear()",
        startup="",
    ),
    _case(
        "file_changed_not_cleared",
        FILE_READER + WARM_FILE,
        'v * tuned()["scale"]',
        'pkg.edit("tuning.json", "0.5", "0.25")\n',
        None,
        "functools.cache tuning-file reader warmed at import; the file edited without cache_clear()",
        startup="",
    ),
    _case(
        "dict_reader_cleared",
        DICT_READER,
        'v * setting("scale")',
        'mod("kern").SETTINGS["scale"] = 0.25\nmod("kern").setting.cache_clear()\n',
        True,
        "lru_cache reader of a module dict; the dict entry set, cache_clear()",
    ),
    _case(
        "method_cache_cleared",
        METHOD_READER,
        "v * TILES.scale(4)",
        'mod("kern").Tiles.ROW_SCALE = 0.25\nmod("kern").Tiles.scale.cache_clear()\n',
        True,
        "lru_cache on a method of a module-level instance: the class constant set, cache_clear()",
    ),
    _case(
        "manual_memo_cleared",
        MANUAL_MEMO,
        "v * cached_scale()",
        SET_ENV + 'mod("kern")._SCALE_CACHE.clear()\n',
        True,
        "a hand-written memo dict over an env reader: env changed, the dict cleared",
    ),
    _case(
        "manual_memo_warmed_cleared",
        MANUAL_MEMO + "\n_WARM = cached_scale()  # warmed at import, before any trace\n",
        "v * cached_scale()",
        SET_ENV + 'mod("kern")._SCALE_CACHE.clear()\n',
        True,
        "a hand-written memo dict over an env reader warmed at import: env changed, the dict cleared",
    ),
    _case(
        "manual_memo_filled_by_other_launcher",
        MANUAL_MEMO + "\nREADER = cached_scale\n",
        "v * cached_scale()",
        SET_ENV + 'mod("kern")._SCALE_CACHE.clear()\n',
        True,
        "a hand-written memo dict over an env reader, filled by another launcher's trace: env changed, cleared",
        setup=OTHER_FIRST,
    ),
    _case(
        "lru_reader_filled_by_other_launcher",
        ENV_READER + "\nREADER = vec_scale\n",
        "v * vec_scale()",
        SET_ENV + CLEAR_ENV,
        True,
        "an lru_cache env reader filled by another launcher's trace: env changed, cache_clear()",
        setup=OTHER_FIRST,
    ),
    _case(
        "neutral_clear_only",
        ENV_READER,
        "v * vec_scale()",
        CLEAR_ENV,
        False,
        "NEUTRAL: cache_clear() with nothing changed",
    ),
    _case(
        "neutral_unrelated_env_cleared",
        ENV_READER + WARM_ENV,
        "v * vec_scale()",
        'os.environ["FAM_UNRELATED"] = "1"\n' + CLEAR_ENV,
        False,
        "NEUTRAL: an environment variable nobody reads set, cache_clear()",
    ),
)
