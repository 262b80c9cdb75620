"""One process of the chain-reduction test: python chain_worker.py STORE_DIR RANK SIZES MODE OUT.

SIZES is the comma-separated number of logical workers per process (contiguous
ranges in rank order); MODE is "chain" or "allreduce" (gloo's own all_reduce of
each process's pre-summed gradients, the placement-dependent baseline).
"""

import hashlib
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from easyscale.reduce import chain, fold, scale

ELEMENTS = 262_144


def gradient(lw: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + lw)
    # magnitudes spread over many binades, so the order of additions shows in the bits
    return torch.randn(ELEMENTS, generator=g) * torch.exp(torch.randn(ELEMENTS, generator=g) * 4)


def main() -> None:
    store_dir, rank, sizes, mode, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    counts = [int(c) for c in sizes.split(",")]
    world = sum(counts)
    first = sum(counts[:rank])
    mine = [gradient(lw) for lw in range(first, first + counts[rank])]
    if len(counts) > 1:
        store = dist.FileStore(f"{store_dir}/store", len(counts))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=len(counts),
                                timeout=timedelta(seconds=30))
    if mode == "chain":
        if rank == 0:
            local = fold(None, mine)
            result = chain(local, [], world, chunk_elements=50_000)
        else:
            result = chain(torch.empty(ELEMENTS), mine, world, chunk_elements=50_000)
    else:
        local = fold(None, mine)
        if len(counts) > 1:
            dist.all_reduce(local)
        result = scale(local, world)
    with open(out, "w") as f:
        f.write(hashlib.sha256(result.numpy().tobytes()).hexdigest())
    if len(counts) > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
