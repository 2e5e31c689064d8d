"""FlyDSL's generic flash-attention forward (``examples/flydsl_fa``) compiles for real through
flydsl_runtime, and a new process is served from the persistent index without tracing.

Each call runs in a fresh process (``COMPILE_ONLY=1``, ``ARCH=gfx942``: FlyDSL compiles and
stops before the launch) with this test's own FlyDSL cache and flydeps index directories:

1. the first process traces the launcher once and FlyDSL writes a real gfx942 code object
   for ``flash_attn_generic_kernel`` (checked in the artifact, not assumed);
2. a second process under ``FLYDEPS_AOT=strict`` is served from the index: FlyDSL traces 0
   times (strict would raise instead of tracing);
3. bad input: a third strict process calling with f32 tensors (another specialization) is
   refused with ``AotMissError`` naming the launcher and the differing argument, without
   tracing, and the index keeps exactly the row it had.

Step 2 is what real FlyDSL code found: its traits dataclass annotates ``SM_SCALE: float |
None``, whose PEP 604 union was digested by identity, so the generated ``__init__`` made the
launcher unshareable across processes (no row; every process traced, strict refused).
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flydsl")
pytest.importorskip("torch")

from flydsl_runtime.persist import index  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CHILD = """
import json, sys, torch
sys.path.insert(0, {examples!r})
from flydsl.compiler.jit_function import JitFunction
traced = []
real = JitFunction._trace
def spy(self, *a, **k):
    traced.append(self.func.__name__)
    return real(self, *a, **k)
JitFunction._trace = spy
from flydsl_fa import launcher
flash_attn = launcher(8, 64, True, "f16")  # 8 heads, head dim 64, causal, f16
batch, seq_len = 1, 128
shape = (batch, seq_len, 8, 64)
q, k, v, out = (torch.zeros(shape, dtype=torch.{dtype}) for _ in range(4))
error = None
try:
    flash_attn(q, k, v, out, batch, seq_len)
except Exception as exc:
    error = type(exc).__name__ + ": " + str(exc)
print(json.dumps({{"traced": traced, "error": error}}))
"""


def _first_call(tmp: Path, *, dtype: str = "float16", strict: bool = False) -> dict[str, object]:
    """A fresh process's first ``flash_attn`` call: what FlyDSL traced and the error, if any."""
    env = {
        **os.environ,
        "COMPILE_ONLY": "1",
        "ARCH": "gfx942",
        "FLYDEPS_AOT": "strict" if strict else "off",
        "FLYDEPS_CACHE_DIR": str(tmp / "flydeps"),
        "FLYDSL_RUNTIME_CACHE_DIR": str(tmp / "flydsl"),
        "FLYDSL_RUNTIME_ENABLE_CACHE": "1",
    }
    env.pop("FLYDEPS_VERIFY", None)
    code = CHILD.format(examples=str(EXAMPLES), dtype=dtype)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rows(tmp: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp / "flydeps" / index.INDEX_NAME) as conn:
        return sorted(conn.execute("SELECT key, ir_key FROM specializations").fetchall())


def test_flash_attn_compiles_for_real_and_a_new_process_is_served_without_tracing(
    tmp_path: Path, rocm_root: Path
) -> None:
    first = _first_call(tmp_path)
    assert first == {"traced": ["launch_flash_attn_generic"], "error": None}
    artifacts = sorted((tmp_path / "flydsl").rglob("*.pkl"))
    assert len(artifacts) == 1, artifacts
    with artifacts[0].open("rb") as f:
        ir_text = pickle.load(f)._ir_text  # FlyDSL's CompiledArtifact: the module with its gpu.binary
    assert 'chip = "gfx942"' in ir_text and "flash_attn_generic_kernel" in ir_text
    assert "\\7FELF" in ir_text  # the code object itself (an AMDGPU ELF), not just the IR
    rows = _rows(tmp_path)
    assert len(rows) == 1, rows

    assert _first_call(tmp_path, strict=True) == {"traced": [], "error": None}

    refused = _first_call(tmp_path, dtype="float32", strict=True)
    assert refused["traced"] == []
    error = str(refused["error"])
    assert error.startswith("AotMissError: FLYDEPS_AOT=strict: flydsl_fa.flash_attn_generic."), error
    assert "launch_flash_attn_generic() has no shipped specialization" in error, error
    assert "argument 'Q': Tensor(torch.float16" in error and "-> Tensor(torch.float32" in error, error
    assert _rows(tmp_path) == rows
