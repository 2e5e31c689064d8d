"""Issue 7.7: launchers whose traces write shared state (a memo dict, a registry list).

Two real FlyDSL launchers call one helper that memoizes into a module dict and appends to a
registry while tracing. A write made by either trace is a managed build's own effect: the
other launcher neither raises (``on_drift="raise"``, the default) nor retraces. A user's own
change to that data still follows ``on_drift``, with the old and new values in the message.
Real compiles (COMPILE_ONLY=1, CPU).
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydeps import GlobalDriftError  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024

SHARED = '''
import flydsl.expr as fx

import flydsl_runtime.flyc as flyc
from flydeps import cached_factory

REGISTRY = []
MEMO = {}
HOOK = []  # tests: called while a trace runs


def block_for(name):
    """Memoizes and records while a trace runs (kernel repositories do both)."""
    for hook in list(HOOK):
        hook()
    if name not in MEMO:
        MEMO[name] = 64
    REGISTRY.append(name)
    return MEMO[name]


@cached_factory
def plan(name):
    return block_for(name)


@flyc.kernel
def copy_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid]


@flyc.kernel
def double_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid] + a[tid]


@flyc.jit{policy}
def copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    block = block_for("copy")
    copy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(block, 1, 1))


@flyc.jit{policy}
def double(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    block = block_for("double")
    double_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(block, 1, 1))


@flyc.jit{policy}
def broken(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    block = block_for("broken")  # writes MEMO and REGISTRY, then the trace fails
    raise ValueError(f"no {block}-wide variant of this kernel")
'''


def _load(fdk, policy: str = ""):
    path = fdk.root / fdk.name / "shared.py"
    path.write_text(textwrap.dedent(SHARED).replace("{policy}", f"(on_drift={policy!r})" if policy else ""))
    return fdk.module("shared")


def _tensors(n: int = N) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(n), torch.zeros(n)


def test_launchers_sharing_a_memoizing_helper_never_raise_or_retrace_each_other(fdk, traces) -> None:
    shared = _load(fdk)  # on_drift="raise", the launchers' default
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.double(a, c, N)  # its trace writes MEMO and REGISTRY, which copy's trace read
    assert shared.REGISTRY == ["copy", "double"] and shared.MEMO == {"copy": 64, "double": 64}
    for _ in range(3):
        shared.copy(a, c, N)
        shared.double(a, c, N)
    assert traces == ["copy", "double"]
    assert shared.copy.cache_info().hits == 3 and shared.double.cache_info().hits == 3


def test_a_new_trace_of_one_launcher_does_not_disturb_the_other(fdk, traces) -> None:
    shared = _load(fdk)
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.double(a, c, N)
    shared.double.cache_clear()  # forces a new trace, which appends to REGISTRY again
    shared.double(a, c, N)
    shared.copy(a, c, N)
    assert traces == ["copy", "double", "double"] and shared.REGISTRY == ["copy", "double", "double"]
    assert shared.copy.cache_info().hits == 1


def test_a_failed_traces_writes_are_its_own_effect_too(fdk, traces) -> None:
    """A trace that wrote the shared memo and registry and then failed (a specialization
    that cannot be built) is still a managed build: its caller gets its error, and the
    other launcher, whose trace read that data, neither raises GlobalDriftError nor
    retraces (before: every launcher reading the registry raised after one failed trace)."""
    shared = _load(fdk)  # on_drift="raise"
    a, c = _tensors()
    shared.copy(a, c, N)
    with pytest.raises(Exception, match="no 64-wide variant"):
        shared.broken(a, c, N)
    assert shared.REGISTRY == ["copy", "broken"] and shared.MEMO == {"copy": 64, "broken": 64}
    shared.copy(a, c, N)
    shared.double(a, c, N)
    assert traces == ["copy", "broken", "double"] and shared.copy.cache_info().hits == 1
    with pytest.raises(Exception, match="no 64-wide variant"):  # and it fails again, by itself
        shared.broken(a, c, N)


def test_users_own_change_still_raises_with_real_values(fdk, traces) -> None:
    shared = _load(fdk)
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.double(a, c, N)
    shared.REGISTRY.append("edited by the user")
    shared.MEMO["copy"] = 32  # the block size copy's IR launches with
    with pytest.raises(GlobalDriftError) as err:
        shared.copy(a, c, N)
    # old: what copy was traced with (the managed write after it is not the reason)
    assert err.value.name == "MEMO" and err.value.old == "{'copy': 64}"
    assert err.value.new == "{'copy': 32, 'double': 64}"
    assert "{'copy': 64} -> {'copy': 32, 'double': 64}" in str(err.value)


def test_users_change_that_never_reaches_the_ir_is_kept(fdk, traces) -> None:
    """Under on_drift='raise', FlyDSL's IR decides (issue 35): a registry nothing in the IR
    depends on, edited by the user, costs one re-trace of the entry, then hits."""
    shared = _load(fdk)
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.REGISTRY.append("edited by the user")
    shared.copy(a, c, N)
    shared.copy(a, c, N)
    assert traces == ["copy", "copy"] and shared.copy.cache_info().hits == 2


def test_users_own_change_rebuilds_under_rebuild(fdk, traces) -> None:
    shared = _load(fdk, "rebuild")
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.double(a, c, N)
    shared.MEMO["copy"] = 64  # same value, but a user's write: MEMO is unchanged in content
    shared.copy(a, c, N)
    assert traces == ["copy", "double"], "equal content: nothing to rebuild"
    shared.MEMO["user"] = 1
    shared.copy(a, c, N)
    assert traces == ["copy", "double", "copy"]


def test_cached_factory_and_launcher_share_the_record(fdk, traces) -> None:
    """A cached_factory whose build calls the same helper: its writes are managed too."""
    shared = _load(fdk)
    a, c = _tensors()
    shared.copy(a, c, N)
    assert shared.plan("factory") == 64
    shared.copy(a, c, N)  # no GlobalDriftError: the factory's build wrote MEMO and REGISTRY
    assert traces == ["copy"] and shared.copy.cache_info().hits == 1


def test_helper_rebound_while_the_trace_runs_is_not_kept(fdk, traces) -> None:
    """Issue 8.1 on a launcher: the trace that saw the old helper is returned, never kept."""
    shared = _load(fdk)
    a, c = _tensors()
    original = shared.block_for

    def rebind() -> None:  # what another thread would do in the middle of the trace
        shared.HOOK.clear()

        def block_for(name):
            return original(name)

        shared.block_for = block_for

    shared.HOOK.append(rebind)
    shared.copy(a, c, N)
    shared.copy(a, c, N)  # the first trace was not kept: traced again, with the new helper
    shared.copy(a, c, N)
    assert traces == ["copy", "copy"] and shared.copy.cache_info().hits == 1


def test_data_reset_to_a_state_managed_builds_started_from_is_adopted(fdk, traces) -> None:
    """A reload re-runs ``MEMO = {}`` and ``REGISTRY = []``: states from which the recorded
    managed-build writes lead to what each launcher was traced with. Undoing the builds' own
    writes is no user change (no raise, for both): copy's trace started from them (kept, no
    trace); double's trace read what copy's wrote, computed from inputs double never read,
    so it is re-traced once and kept on the same IR (issue 35). A state no managed build
    went through and that reaches the IR is a user's change (it raises, by default)."""
    shared = _load(fdk)
    a, c = _tensors()
    shared.copy(a, c, N)
    shared.double(a, c, N)
    shared.MEMO.clear()
    shared.REGISTRY.clear()
    shared.copy(a, c, N)
    shared.double(a, c, N)
    shared.double(a, c, N)
    assert traces == ["copy", "double", "double"]
    assert shared.copy.cache_info().hits == 1 and shared.double.cache_info().hits == 2
    shared.MEMO.clear()
    shared.MEMO["copy"] = 32  # a user's change that reaches copy's IR (its block size)
    with pytest.raises(GlobalDriftError):
        shared.copy(a, c, N)
