"""Static analyzer speed on the synthetic repository (issue 3 targets).

Each measurement runs ``flydeps graph`` in a fresh interpreter (as a user would), with a
fresh or a filled parse cache, and reports the best of N wall times. Also measures the
parsers alone on the same tree: stdlib ``ast``, ``compile`` + digests, and libcst.

``--format pycg`` measures the same rows with the call graph asked for (issue 13): every
run, the one-kernel-file one included, writes ``--format pycg``. ``--no-parsers`` skips the
parser rows. ``PYTHONPATH`` is passed on to the measured runs, so an older tree can be
measured as ``PYTHONPATH=/tmp/before-src python benchmarks/bench_static.py``.

Usage: python benchmarks/bench_static.py [--repeat 3] [--format json|pycg] [--no-parsers]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_synthetic_repo import generate  # noqa: E402


def _run(args: list[str], cache: Path, clear: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        if clear:
            shutil.rmtree(cache, ignore_errors=True)
        env = {"FLYDEPS_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
        env.update((k, os.environ[k]) for k in ("PYTHONPATH",) if k in os.environ)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "flydeps", *args], env=env, capture_output=True, check=False)
        best = min(best, time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(done.stderr.decode())
    return best


def _run_after_edit(args: list[str], cache: Path, victim: Path, repeat: int) -> float:
    """Warm parse cache, but one file changed (a comment): the result cache misses and
    the whole graph is resolved again from cached summaries plus one fresh parse."""
    best = float("inf")
    original = victim.read_text()
    for n in range(repeat):
        victim.write_text(original + f"\n# edit {n}\n")
        best = min(best, _run(args, cache, False, 1))
    victim.write_text(original)
    return best


def _parsers(files: list[Path]) -> dict[str, float]:
    import ast

    import libcst

    from flydeps.code.bytecode import code_digest, code_refs, iter_qualnames

    sources = [f.read_bytes() for f in files]
    out = {}
    start = time.perf_counter()
    for s in sources:
        ast.parse(s)
    out["stdlib ast parse only (1 core)"] = time.perf_counter() - start
    start = time.perf_counter()
    for s in sources:
        for _, code in iter_qualnames(compile(s, "x.py", "exec")):
            code_digest(code)
            code_refs(code)
    out["compile + code digests + refs (1 core)"] = time.perf_counter() - start
    start = time.perf_counter()
    for s in sources:
        libcst.parse_module(s)
    out["libcst parse only (1 core)"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--format", choices=("json", "pycg"), default="json")
    parser.add_argument("--no-parsers", action="store_true", help="skip the parser-only rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        count, lines = generate(base)
        repo = base / "synthrepo"
        cache = base / "cache"
        whole = ["graph", str(repo), "--format", args.format, "-o", str(base / "o.json")]
        one = ["graph", str(repo / "attention" / "attention_0.py"), "-o", str(base / "o.txt")]
        if args.format == "pycg":
            one += ["--format", "pycg"]
        victim = repo / "common" / "common_3.py"
        rows = [
            ("whole tree, cold (empty parse cache)", _run(whole, cache, True, args.repeat), 5.0),
            ("whole tree, warm (nothing changed)", _run(whole, cache, False, args.repeat), 0.5),
            (
                "whole tree, one helper edited (summaries cached, graph rebuilt)",
                _run_after_edit(whole, cache, victim, args.repeat),
                None,
            ),
            ("one kernel file + its imports, cold", _run(one, cache, True, args.repeat), 1.5),
        ]
        parse_rows = {} if args.no_parsers else _parsers(sorted(repo.rglob("*.py")))
    version = sys.version.split()[0]
    print(f"Synthetic repository: {count} modules, {lines} lines; best of {args.repeat}; Python {version}\n")
    print(f"| measurement (wall time of `python -m flydeps graph ... --format {args.format}`) | seconds | target |")
    print("|---|---:|---:|")
    for name, seconds, target in rows:
        print(f"| {name} | {seconds:.2f} | {'≤ ' + str(target) if target else '–'} |")
    for name, seconds in parse_rows.items():
        print(f"| {name} | {seconds:.2f} | – |")


if __name__ == "__main__":
    main()
