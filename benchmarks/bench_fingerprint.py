"""Cold code digests: the direct ``co_code`` decoder vs the ``dis`` reference, side by side.

Two tables, both measured in one process with the implementations run in turn, round
after round (the best round of each, garbage collection outside the timed runs, so
machine noise hits all alike):

1. per code object: every function of a few stdlib modules and of ``examples/``, digest
   and references computed from scratch (``_codescan.decode`` vs ``_disref.analyze``);
2. cold ``flydeps.fingerprint`` of a launcher reaching N helpers over N/8 modules (the
   package of ``bench_factory.py``), code digests forgotten before each run; the
   decoder vs the ``dis`` reference as the digest implementation, and the same
   fingerprint with code digests memoized (what the rest of the cold path costs).

    python benchmarks/bench_fingerprint.py            # markdown tables on stdout
    python benchmarks/bench_fingerprint.py --json
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from bench_factory import write_package  # noqa: E402

import flydeps  # noqa: E402
from flydeps.code import bytecode as _bytecode  # noqa: E402
from flydeps.code import disref as _disref  # noqa: E402
from flydeps.code import scan as _codescan  # noqa: E402
from flydeps.code.bytecode import iter_qualnames  # noqa: E402


def corpus() -> list[CodeType]:
    """Function bodies of some stdlib modules and of the examples (compiled, not imported)."""
    import argparse as a
    import email.message as e
    import json.decoder as j
    import textwrap as t

    files = [Path(m.__file__) for m in (a, e, j, t)]  # type: ignore[arg-type]
    files += sorted((HERE.parent / "examples").rglob("*.py"))
    codes = []
    for path in files:
        module = compile(path.read_text(), str(path), "exec", dont_inherit=True)
        codes += [code for _, code in iter_qualnames(module) if code.co_flags & 0x2]
    return codes


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()  # a collection landing in one variant's run is noise, not cost
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def interleaved(variants: list[Callable[[], object]], rounds: int) -> list[float]:
    """Best time of each variant, the variants run in turn ``rounds`` times."""
    best = [float("inf")] * len(variants)
    for _ in range(rounds):
        for k, fn in enumerate(variants):
            best[k] = min(best[k], timed(fn))
    return best


def per_code(rounds: int) -> dict:
    codes = corpus()
    assert _bytecode.TABLE is not None, "no opcode tables for this interpreter"
    table = _bytecode.TABLE
    dis_s, direct_s = interleaved(
        [lambda: [_disref.analyze(c) for c in codes], lambda: [_codescan.decode(c, table) for c in codes]], rounds
    )
    n = len(codes)
    return {"codes": n, "dis_us": dis_s / n * 1e6, "direct_us": direct_s / n * 1e6, "ratio": dis_s / direct_s}


def cold_fingerprint(counts: list[int], rounds: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        for n in counts:
            name = f"bench_fp_{n}"
            write_package(Path(tmp), name, n)
            launcher = importlib.import_module(f"{name}.factories").factory(64)

            def cold() -> None:
                _bytecode._analysis.clear()
                flydeps.fingerprint(launcher)

            def cold_dis() -> None:
                table, _bytecode.TABLE = _bytecode.TABLE, None  # the dis reference decodes
                try:
                    cold()
                finally:
                    _bytecode.TABLE = table

            flydeps.fingerprint(launcher)  # import-time work out of the way
            dis_s, direct_s, memo_s = interleaved([cold_dis, cold, lambda: flydeps.fingerprint(launcher)], rounds)
            rows.append(
                {
                    "helpers": n,
                    "dis_us_per_helper": dis_s / n * 1e6,
                    "direct_us_per_helper": direct_s / n * 1e6,
                    "memoized_us_per_helper": memo_s / n * 1e6,
                    "ratio": dis_s / direct_s,
                    "digest_ratio": (dis_s - memo_s) / max(direct_s - memo_s, 1e-9),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="10,100,400")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    codes = per_code(args.rounds)
    cold = cold_fingerprint([int(c) for c in args.counts.split(",")], args.rounds)
    info = f"CPython {platform.python_version()}"
    if args.json:
        print(json.dumps({"python": info, "per_code": codes, "cold": cold}, indent=2))
        return
    print(f"#### Code digest per code object, {info} ({codes['codes']} functions)\n")
    print("| dis reference | direct decoder | speed-up |\n|---:|---:|---:|")
    print(f"| {codes['dis_us']:.1f} µs | {codes['direct_us']:.1f} µs | {codes['ratio']:.1f}x |")
    print(f"\n#### Cold fingerprint per helper, {info}\n")
    print("| helpers | dis reference | direct decoder | speed-up | code digests memoized | digest part speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in cold:
        digest_part = (
            f"{r['digest_ratio']:.1f}x" if r["direct_us_per_helper"] > r["memoized_us_per_helper"] else "(noise)"
        )
        print(
            f"| {r['helpers']} | {r['dis_us_per_helper']:.1f} µs | {r['direct_us_per_helper']:.1f} µs "
            f"| {r['ratio']:.1f}x | {r['memoized_us_per_helper']:.1f} µs | {digest_part} |"
        )


if __name__ == "__main__":
    main()
