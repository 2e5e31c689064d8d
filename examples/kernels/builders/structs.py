"""Two builders, each with its own ``@fx.struct`` shared-memory layout nested inside."""

import flydsl.compiler as flyc
import flydsl.expr as fx

from ..common import mem


def build_tile_copy(N, vec_width=8):
    """Copy a row through shared memory laid out by the builder's own struct."""

    @fx.struct
    class SharedStorage:
        tile: fx.Array[fx.Float16, 128]
        count: fx.Int32

    @flyc.kernel
    def tile_copy_kernel(src: fx.Tensor, dst: fx.Tensor):
        row = fx.block_idx.x
        storage = fx.SharedAllocator(SharedStorage).allocate()
        storage.tile.store(mem.load_tile(src, row, vec_width))
        mem.store_tile(dst, row, N, storage.tile.load())

    @flyc.jit
    def launch_tile_copy(src: fx.Tensor, dst: fx.Tensor):
        tile_copy_kernel(src, dst).launch(grid=(src.shape[0], 1, 1), block=(64, 1, 1))

    return launch_tile_copy


def build_tile_reduce(N):
    """Same shape, different struct body: the layouts must not share a digest."""

    @fx.struct
    class SharedStorage:
        partial: fx.Array[fx.Float32, 64]

    @flyc.kernel
    def tile_reduce_kernel(src: fx.Tensor, dst: fx.Tensor):
        row = fx.block_idx.x
        storage = fx.SharedAllocator(SharedStorage).allocate()
        storage.partial.store(mem.load_tile(src, row, N))
        mem.store_tile(dst, row, 1, [storage.partial.load()[0]])

    @flyc.jit
    def launch_tile_reduce(src: fx.Tensor, dst: fx.Tensor):
        tile_reduce_kernel(src, dst).launch(grid=(src.shape[0], 1, 1), block=(64, 1, 1))

    return launch_tile_reduce
