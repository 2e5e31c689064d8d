"""Class-based kernels: the base class builds, subclasses override the statistics."""

import flydsl.compiler as flyc
import flydsl.expr as fx

from ..common import load_tile, row_sum, store_tile

EPS = 1e-6


class NormKernelBase:
    """Builds a normalization kernel; ``_statistics`` and ``_normalize`` are the hooks."""

    block = 256

    def _statistics(self, values):
        mean = row_sum(values) / len(values)
        var = row_sum([(x - mean) * (x - mean) for x in values]) / len(values)
        return mean, var

    def _normalize(self, values, mean, var):
        inv = fx.rsqrt(var + EPS)
        return [(x - mean) * inv for x in values]

    def build(self, hidden):
        """Return the launcher for rows of ``hidden`` elements."""

        @flyc.kernel
        def norm_kernel(x: fx.Tensor, weight: fx.Tensor, out: fx.Tensor):
            row = fx.block_idx.x
            values = load_tile(x, row, hidden)
            mean, var = self._statistics(values)
            scaled = [
                y * w for y, w in zip(self._normalize(values, mean, var), load_tile(weight, 0, hidden), strict=True)
            ]
            store_tile(out, row, hidden, scaled)

        @flyc.jit
        def launch_norm(x: fx.Tensor, weight: fx.Tensor, out: fx.Tensor):
            norm_kernel(x, weight, out).launch(grid=(x.shape[0], 1, 1), block=(self.block, 1, 1))

        return launch_norm


class LayerNormKernel(NormKernelBase):
    """Plain layer norm: the base class's statistics."""


class RMSNormKernel(NormKernelBase):
    """RMS norm: no mean subtraction, so both hooks are overridden."""

    block = 128

    def _statistics(self, values):
        return 0.0, row_sum([x * x for x in values]) / len(values)

    def _normalize(self, values, mean, var):
        return [x * fx.rsqrt(var + EPS) for x in values]
