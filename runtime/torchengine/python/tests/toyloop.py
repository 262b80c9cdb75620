"""A small training script of the loop API for the engine's tests: conv + BatchNorm + dropout, clipping,
OneCycleLR per step, a registered counter, augmentation drawing from the global generators.

Run by easyscale (job file [torch] script) or in a test with an installed session (:func:`main`).
Variants for the self-check's cases come from the command line (``--case``).
"""

from __future__ import annotations

import argparse
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

import easyscale
import easyscale.distributed as dist
from easyscale import DataLoader, DistributedDataParallel as DDP, DistributedSampler, register


class Images(torch.utils.data.Dataset):
    def __init__(self, n: int, jitter: bool = False) -> None:
        g = torch.Generator().manual_seed(99)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)
        self.jitter = jitter

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.x[i]
        if self.jitter:  # a transform drawing from the global generators (torch's and Python's)
            x = x + 0.05 * torch.randn(x.shape) + 0.01 * random.random()
        return x, int(self.y[i])


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)
        self.drop, self.fc = nn.Dropout(0.3), nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(F.relu(self.bn(self.conv(x))).flatten(1)))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=48)
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--clip", type=float, default=0.5)
    p.add_argument("--jitter", action="store_true")
    p.add_argument("--from-epoch-0", action="store_true", help="the resume mistake: the epoch loop starts at 0")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse(sys.argv[1:] if argv is None else argv)
    dist.init_process_group("gloo")
    torch.manual_seed(7)
    model = DDP(Net())
    train = Images(args.samples, args.jitter)
    sampler = DistributedSampler(train, shuffle=True, seed=7)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=args.epochs * len(loader))
    progress = {"steps": 0, "norms": []}
    register(opt, sched, progress)
    for epoch in range(0 if args.from_epoch_0 else loader.epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:
            opt.zero_grad(set_to_none=True)
            for x, y in batch:
                batch.backward(F.cross_entropy(model(x), y))
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            sched.step()
            progress["steps"] += 1
            progress["norms"].append(float(norm))
    return {"model": model, "progress": progress, "loader": loader}


if __name__ == "__main__":
    main()
