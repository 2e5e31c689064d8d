"""A server-like script: calls the realworld example launchers as a serving process would.

    python examples/serve_kernels.py [norms|softmax|all] [--requests N]

Each "request" runs a few kernels on tensors of the sizes requests come in (several row
counts of one width are one specialization: FlyDSL keys tensors layout-dynamic), with the
options a model configures (``width``, ``eps`` left at its default, ``bias`` as a keyword,
a builder's launcher, an instance's ``@flyc.jit`` method). ``norms`` and ``softmax`` are
two disjoint subsets, so two processes record different calls:

    flydeps aot record --manifest a.jsonl -- python examples/serve_kernels.py norms
    flydeps aot record --manifest b.jsonl -- python examples/serve_kernels.py softmax
    flydeps aot merge a.jsonl b.jsonl -o m.jsonl
    PYTHONPATH=examples flydeps aot build --manifest m.jsonl --arch gfx942,gfx950 --out /tmp/aot

(docs/cli.md, "flydeps aot record"). The ``softmax`` subset also calls a launcher its
request handler builds on the fly (no module-level name holds it): the manifest lists it as
``unnamed`` and a build skips it, saying why. On a machine without a GPU, run it with
``COMPILE_ONLY=1`` (each call compiles and returns without launching).
"""

from __future__ import annotations

import argparse

import torch
from kernels.realworld import norms, quant, softmax

ROW_COUNTS = (256, 512)  # the batch sizes requests come in (one specialization per width)


def serve_norms(rows: int) -> None:
    for width in (1, 2):
        x, w = torch.zeros(rows * width), torch.zeros(width)
        norms.rmsnorm(x, w, x, rows, width)  # eps and stream left at their defaults
    x, w = torch.zeros(rows * 4), torch.zeros(4)
    norms.layernorm(x, w, w, x, rows, width=4)


def serve_softmax(rows: int) -> None:
    x = torch.zeros(rows * 4)
    softmax.softmax_w4(x, x, rows)
    softmax.softmax_w4_scaled(x, x, rows)
    quant.QUANT.launch(x, x, rows, bias=1.0)
    _on_the_fly(x, rows)


_MADE: list = []


def _on_the_fly(x: torch.Tensor, rows: int) -> None:
    """A launcher a handler builds once and keeps in a list: no import path reaches it."""
    if not _MADE:
        _MADE.append(softmax.build_softmax(4, scale=0.25))
    _MADE[0](x, x, rows)


SUBSETS = {"norms": (serve_norms,), "softmax": (serve_softmax,), "all": (serve_norms, serve_softmax)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("subset", nargs="?", choices=sorted(SUBSETS), default="all")
    parser.add_argument("--requests", type=int, default=len(ROW_COUNTS), help="requests to serve")
    args = parser.parse_args(argv)
    for request in range(args.requests):
        rows = ROW_COUNTS[request % len(ROW_COUNTS)]
        for handler in SUBSETS[args.subset]:
            handler(rows)
    print(f"served {args.requests} requests ({args.subset})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
