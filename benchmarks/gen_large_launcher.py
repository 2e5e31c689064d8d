"""Write a deterministic FlyDSL kernel package shaped like a causal flash-attention launcher.

Real flash-attention launchers reach ~430 helpers over dozens of modules (~650 bindings):
tile/layout arithmetic, masks, softmax pieces, buffer helpers, each reading module
constants and calling helpers of other modules. This writes such a package so the warm-path
and cold-fingerprint benchmarks measure that shape, not a toy:

* ``<pkg>/m00.py`` ... ``<pkg>/mNN.py``: ``--modules`` helper modules. Each defines
  ``--helpers`` plain helpers; each helper reads one or two module constants and calls the
  next helper of its own module and one helper of the next module, so a single entry helper
  reaches every helper of every module (a real call chain, executed at trace time).
* ``<pkg>/launcher.py``: a ``@flyc.kernel`` whose trace calls the entry helper and a
  ``@flyc.jit`` launcher with three tensors and a defaulted
  ``stream: fx.Stream = fx.Stream(None)`` that callers omit. By default the entry helper
  gets a Python int, so the whole chain folds to a compile-time constant baked into the IR
  (a trace that costs FlyDSL little); with ``--emit-ir`` it gets the thread index, so every
  helper emits its arithmetic as IR ops while tracing (~2,000 ops: index and tile
  arithmetic the way real helpers emit it; FlyDSL 0.5 traces it in ~250 ms here).

Usage: python benchmarks/gen_large_launcher.py OUT_DIR [--package NAME] [--modules 32] [--helpers 14] [--emit-ir]
Import ``NAME.launcher`` with OUT_DIR on ``sys.path``; ``launch`` is the launcher.
"""

from __future__ import annotations

import argparse
from pathlib import Path

KERNEL = '''"""Flash-attention-shaped launcher over {modules} helper modules ({total} helpers)."""

import flydsl.compiler as flyc
import flydsl.expr as fx

from . import m00

BLOCK = 64


@flyc.kernel
def big_kernel(q: fx.Tensor, k: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    bias = {entry}  # every helper of every module runs while tracing
    out[tid] = q[tid] * k[tid] + bias


@flyc.jit
def launch(q: fx.Tensor, k: fx.Tensor, out: fx.Tensor, n: fx.Int32, stream: fx.Stream = fx.Stream(None)):
    big_kernel(q, k, out).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)
'''


def helper_module(index: int, modules: int, helpers: int) -> str:
    """One helper module: constants, then a chain of helpers fanning out to the next module."""
    last = index == modules - 1
    lines = [f'"""Helpers of module {index:02d} (generated)."""', ""]
    if not last:
        lines += [f"from . import m{index + 1:02d} as nxt", ""]
    lines += [f"TILE_{index} = {16 + index % 5 * 16}", f"WARPS_{index} = {1 + index % 4}", ""]
    for h in range(helpers):
        name = f"h{index:02d}_{h:02d}"
        body = [f"def {name}(x):", f"    y = x * TILE_{index} + {h}"]
        if h % 2:
            body.append(f"    y = y // WARPS_{index} + 1")
        if h + 1 < helpers:
            body.append(f"    y = h{index:02d}_{h + 1:02d}(y % 1009)")
        if not last and h == 0:
            body.append(f"    y = y + nxt.h{index + 1:02d}_00(y % 997)")
        body.append("    return y % 100003")
        lines += body + ["", ""]
    return "\n".join(lines).rstrip() + "\n"


ENTRY_CONSTANT = "m00.h00_00(1) % 7"  # folds to a constant: no IR from the helpers
ENTRY_IR = "m00.h00_00(tid)"  # a traced value: each helper's arithmetic becomes IR ops


def write_package(out: Path, package: str, modules: int, helpers: int, *, emit_ir: bool = False) -> Path:
    """Write the package under ``out``; returns its directory."""
    root = out / package
    root.mkdir(parents=True, exist_ok=True)
    (root / "__init__.py").write_text('"""Generated flash-attention-shaped launcher package."""\n')
    for index in range(modules):
        (root / f"m{index:02d}.py").write_text(helper_module(index, modules, helpers))
    entry = ENTRY_IR if emit_ir else ENTRY_CONSTANT
    (root / "launcher.py").write_text(KERNEL.format(modules=modules, total=modules * helpers, entry=entry))
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--package", default="largefa")
    parser.add_argument("--modules", type=int, default=32)
    parser.add_argument("--helpers", type=int, default=14)
    parser.add_argument("--emit-ir", action="store_true", help="helpers emit IR ops while tracing")
    opts = parser.parse_args(argv)
    if opts.modules < 1 or opts.helpers < 1:
        parser.error("--modules and --helpers must be at least 1")
    write_package(opts.out, opts.package, opts.modules, opts.helpers, emit_ir=opts.emit_ir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
