"""Write a deterministic synthetic kernel repository for the static-analyzer benchmark.

Shape: ``synthrepo/common/`` helper modules (memory, math, layout) that import each other,
and ``synthrepo/<family>/`` kernel modules, each with ``lru_cache`` compile factories
defining nested ``@flyc.kernel`` / ``@flyc.jit`` functions, class-based kernels with
overrides, dispatch tables and many plain helpers. About 100 modules and 50,000 lines.

Usage: python benchmarks/gen_synthetic_repo.py OUT_DIR [--modules N] [--lines-per-module L]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

FAMILIES = ["attention", "norm", "gemm", "moe", "rope", "softmax", "quant", "conv"]


def _helper(rng: random.Random, name: str, callees: list[str]) -> str:
    calls = "\n".join(f"    acc = {c}(acc, x)" for c in rng.sample(callees, min(len(callees), 3)))
    body = "\n".join(f"    acc = acc * {rng.randint(2, 9)} + fx.exp2(x + {i})" for i in range(rng.randint(4, 12)))
    return f'def {name}(acc, x):\n    """Helper {name}."""\n{body}\n{calls}\n    return acc\n'


def _common_module(rng: random.Random, index: int, lines: int) -> str:
    out = ["import flydsl.expr as fx", ""]
    if index:
        out.append(f"from . import common_{index - 1} as prev")
    out.append(f"TILE_{index} = {rng.choice([32, 64, 128])}\n")
    names: list[str] = []
    while sum(s.count("\n") for s in out) < lines:
        name = f"helper_{index}_{len(names)}"
        callees = names[-5:] + ([f"prev.helper_{index - 1}_0"] if index else [])
        out.append(_helper(rng, name, callees or ["fx.max"]))
        names.append(name)
    return "\n".join(out)


def _kernel_module(rng: random.Random, family: str, index: int, commons: int, lines: int) -> str:
    c = rng.sample(range(commons), 3)
    out = ["import functools", "", "import flydsl.compiler as flyc", "import flydsl.expr as fx", ""]
    out += [f"from ..common import common_{i} as c{i}" for i in c] + ["", f"BLOCK = {rng.choice([64, 128, 256])}", ""]
    n = 0
    while sum(s.count("\n") for s in out) < lines:
        helper = f"c{c[n % 3]}.helper_{c[n % 3]}_{n % 4}"
        out.append(f"""
def _local_{n}(acc, x):
    return {helper}(acc, x) + BLOCK


@functools.lru_cache(maxsize=64)
def compile_{family}_{index}_{n}(dim, dtype="f16"):
    scale = dim ** -0.5

    @flyc.kernel
    def kernel_{n}(a: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x
        acc = _local_{n}(fx.Float32(0.0), a[row] * scale)
        for i in fx.range_constexpr(0, BLOCK, 16):
            acc = {helper}(acc, a[row + i])
        out[row] = acc

    @flyc.jit
    def launch_{n}(a: fx.Tensor, out: fx.Tensor):
        kernel_{n}(a, out).launch(grid=(a.shape[0], 1, 1), block=(BLOCK, 1, 1))

    return launch_{n}


class Kernel{n}Base:
    def _reduce(self, x):
        return c{c[0]}.helper_{c[0]}_0(x, x)

    def build(self, dim):
        @flyc.kernel
        def k(a: fx.Tensor):
            a[0] = self._reduce(a[0])

        return k


class Kernel{n}Fast(Kernel{n}Base):
    def _reduce(self, x):
        return c{c[1]}.helper_{c[1]}_1(x, x)


TABLE_{n} = {{"a": _local_{n}, "b": {helper}}}
""")
        n += 1
    return "\n".join(out)


def generate(out: Path, modules: int = 100, lines_per_module: int = 500, seed: int = 3) -> tuple[int, int]:
    """Write the repository; returns (modules, lines)."""
    rng = random.Random(seed)
    pkg = out / "synthrepo"
    commons = modules // 4
    files: dict[Path, str] = {pkg / "__init__.py": "", pkg / "common" / "__init__.py": ""}
    for i in range(commons):
        files[pkg / "common" / f"common_{i}.py"] = _common_module(rng, i, lines_per_module)
    per_family = (modules - commons) // len(FAMILIES)
    for family in FAMILIES:
        files[pkg / family / "__init__.py"] = ""
        for j in range(per_family):
            files[pkg / family / f"{family}_{j}.py"] = _kernel_module(rng, family, j, commons, lines_per_module)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return len(files), sum(t.count("\n") for t in files.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--lines-per-module", type=int, default=500)
    args = parser.parse_args()
    count, lines = generate(args.out, args.modules, args.lines_per_module)
    print(f"wrote {count} modules, {lines} lines under {args.out / 'synthrepo'}")


if __name__ == "__main__":
    main()
