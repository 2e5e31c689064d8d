"""Family ``builders``: builders that define a per-build class, launcher defaults, undo.

FlyDSL's own norm and softmax builders define an ``@fx.struct`` shared-memory struct inside
the builder (``softmax_kernel.py``; ``rmsnorm_common.make_reduction_storage`` returns a new
one per call), so every build has its own class: a new launcher must trace once, and a
second build of the same configuration (plain, or through ``flydeps.cached_factory``) must
not trace more. A change of a launcher default of a runtime-only parameter (``stream``
``fx.Stream(None)`` -> ``fx.Stream(0)``) must not raise ``GlobalDriftError`` under
``on_drift="raise"``. An undo (the original helper put back in the closure that held it;
``unittest.mock.patch`` leaving its block) must hit the original entry again, never raise.
"""

from __future__ import annotations

from families.kernels import rmsnorm, softmax_builder
from families.model import Case

FAMILY = "builders"
RAISE = '@flyc.jit(on_drift="raise")'
REBUILD = 'k = mod("kern")\nk.launch = k.build_softmax(4)\n'
CACHED = {"imports": "import flydeps", "builder_decorator": "@flydeps.cached_factory(maxsize=16)"}

UNDO_PRELUDE = """
SCALE = 0.5
SETTINGS = {"scale": 0.5}


def halve(v):
    return v * 0.5


def make_epilogue(act):
    def epilogue(v):
        return act(v)

    return epilogue


EPILOGUE = make_epilogue(memops.passthrough)
"""


def _undo(name: str, post: str, mutate: str, what: str) -> Case:
    files = rmsnorm(post, prelude=UNDO_PRELUDE, jit=RAISE)
    return Case(FAMILY, name, files, mutate, False, what, new_process=False, expect_hit=True)


CASES: tuple[Case, ...] = (
    Case(
        FAMILY,
        "struct_builder_new_launcher",
        softmax_builder(),
        "",
        None,
        "a new launcher from a builder with a per-build @fx.struct: FlyDSL traces over its first three calls",
        baseline_calls=False,
        max_traces=1,
        new_process=False,
    ),
    Case(
        FAMILY,
        "struct_builder_second_build",
        softmax_builder(),
        REBUILD,
        False,
        "the same builder called again (a new struct class, a new launcher): traces over three calls",
        max_traces=1,
        startup='k = mod("kern")\nk.launch = k.build_softmax(4)\n',
    ),
    Case(
        FAMILY,
        "cached_factory_second_build",
        softmax_builder(**CACHED),
        REBUILD,
        False,
        "a cached_factory builder called again with the same arguments: traces over three calls",
        max_traces=1,
    ),
    Case(
        FAMILY,
        "cached_factory_other_then_back",
        softmax_builder(**CACHED),
        REBUILD.replace("(4)", "(8)") + 'call("width 8", reaches=True)\n' + REBUILD,
        False,
        "a cached_factory builder: another width built and called, then the first width again",
        new_process=False,
    ),
    Case(
        FAMILY,
        "stream_default_live",
        rmsnorm("v", jit=RAISE),
        'mod("kern").launch.func.__defaults__ = (fx.Stream(0),)',
        False,
        "on_drift='raise': the launcher's stream default Stream(None) -> Stream(0), set live",
    ),
    Case(
        FAMILY,
        "stream_default_edited",
        rmsnorm("v", jit=RAISE),
        'pkg.edit("kern.py", "fx.Stream = fx.Stream(None)", "fx.Stream = fx.Stream(0)")',
        False,
        "on_drift='raise': the launcher's stream default Stream(None) -> Stream(0), edited and reloaded",
        startup="",
    ),
    Case(
        FAMILY,
        "stream_default_builder_live",
        softmax_builder(jit=RAISE),
        'mod("kern").launch.func.__defaults__ = (fx.Stream(0),)',
        False,
        "on_drift='raise': a built launcher's stream default Stream(None) -> Stream(0), set live",
    ),
    _undo(
        "undo_closure_helper",
        "EPILOGUE(v)",
        'cell = mod("kern").EPILOGUE.__closure__[0]\noriginal = cell.cell_contents\n'
        'cell.cell_contents = mod("kern").halve\ncall("with the other helper", reaches=True)\n'
        "cell.cell_contents = original\n",
        "on_drift='raise': the helper a closure holds replaced, called, the original put back",
    ),
    _undo(
        "undo_mock_patch_helper",
        "memops.passthrough(v)",
        'with mock.patch.object(mod("memops"), "passthrough", mod("kern").halve):\n'
        '    call("inside mock.patch", reaches=True)\n',
        "on_drift='raise': a helper under unittest.mock.patch.object, called inside, then the block left",
    ),
    _undo(
        "undo_mock_patch_constant",
        "v * SCALE",
        'with mock.patch.object(mod("kern"), "SCALE", 0.25):\n    call("inside mock.patch", reaches=True)\n',
        "on_drift='raise': a module constant under mock.patch.object (inside: raise allowed), block left",
    ),
    _undo(
        "undo_mock_patch_dict",
        'v * SETTINGS["scale"]',
        'with mock.patch.dict(mod("kern").SETTINGS, {"scale": 0.25}):\n'
        '    call("inside mock.patch.dict", reaches=True)\n',
        "on_drift='raise': a settings dict under mock.patch.dict (inside: raise allowed), block left",
    ),
)
