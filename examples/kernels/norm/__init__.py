"""Normalization kernels (class based: one build method, per-subclass reductions)."""

from .rmsnorm import LayerNormKernel, RMSNormKernel

__all__ = ["LayerNormKernel", "RMSNormKernel"]
