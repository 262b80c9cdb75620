"""A small training script of the loop API for the engine's tests: conv + BatchNorm + dropout, clipping,
OneCycleLR per step, a registered counter, augmentation drawing from the global generators.

Run by easyscale (job file [torch] script) or in a test with an installed session (:func:`main`).
Variants for the self-check's cases come from the command line (``--case``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import easyscale
import easyscale.distributed as dist
from easyscale import DataLoader, DistributedDataParallel as DDP, DistributedSampler, register


class Images(torch.utils.data.Dataset):
    def __init__(self, n: int, jitter: bool = False, own_rng: str = "") -> None:
        g = torch.Generator().manual_seed(99)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)
        self.jitter = jitter
        # a generator of the data set's own, drawn by every sample (what the self-check must name)
        self.count_reads, self.reads = own_rng == "counter", 0
        self.rng: Any = None
        if own_rng == "python":
            self.rng = random.Random(3)
        elif own_rng == "numpy":
            import numpy
            self.rng = numpy.random.default_rng(3)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.x[i]
        if self.jitter:  # a transform drawing from the global generators (torch's and Python's)
            x = x + 0.05 * torch.randn(x.shape) + 0.01 * random.random()
        if self.rng is not None:
            x = x + 0.01 * float(self.rng.random())
        if self.count_reads:  # a counter on the data set that changes what it returns after many reads
            self.reads += 1
            x = x * 0.5 if self.reads > 100_000 else x
        return x, int(self.y[i])


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)
        self.drop, self.fc = nn.Dropout(0.3), nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(F.relu(self.bn(self.conv(x))).flatten(1)))


class OwnedGeneratorNet(Net):
    """Dropout drawn from a torch.Generator the model owns (what the issue found silently breaking)."""

    def __init__(self) -> None:
        super().__init__()
        self.gen = torch.Generator().manual_seed(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x))).flatten(1)
        keep = (torch.rand(h.shape, generator=self.gen) > 0.3).to(h.dtype)
        return self.fc(h * keep / 0.7)


class RunningStatNet(Net):
    """A running mean kept in a plain tensor attribute instead of a registered buffer, and used."""

    def __init__(self) -> None:
        super().__init__()
        self.running = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x))).flatten(1)
        if self.training:
            self.running = 0.9 * self.running + 0.1 * h.mean().detach()
        return self.fc(self.drop(h - self.running))


class LateCounterNet(Net):
    """A call counter on the model whose effect starts after the checked steps (a tester's case: the increments
    add up to the same total in both of the check's placements)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
        out = super().forward(x)
        return out * 0.5 if self.calls > 1000 and self.calls % 2 == 0 else out


class HistoryNet(Net):
    """A history list on the model, appended to in every training forward and read once it is long."""

    def __init__(self) -> None:
        super().__init__()
        self.hist: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.hist.append(1.0)
        out = super().forward(x)
        return out * 0.5 if len(self.hist) > 1000 else out


class ClassCounterNet(Net):
    """A counter kept as a class attribute (shared by the class's instances), read after many calls."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            ClassCounterNet.calls += 1
        out = super().forward(x)
        return out * 0.5 if ClassCounterNet.calls > 100_000 else out


class InPlaceBufferNet(Net):
    """A registered buffer updated in place in the forward and used in the loss, beside BatchNorm (whose own
    in-place update of its running statistics must not bump this buffer's version)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("avg", torch.zeros(4 * 6 * 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x))).flatten(1)
        if self.training:
            self.avg.mul_(0.9).add_(0.1 * h.mean(0).detach())
        return self.fc(self.drop(h - self.avg))


CALLS = [0]


class GlobalCounterNet(Net):
    """A module-level counter the forward reads: a global the runtime cannot see."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS[0] += 1
        return super().forward(x) * (1 + 0.01 * (CALLS[0] % 3))


class LSTMNet(nn.Module):
    """An LSTM over the image's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.drop, self.fc = nn.LSTM(8, 12, batch_first=True), nn.Dropout(0.2), nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x.squeeze(1))
        return self.fc(self.drop(out[:, -1]))


class SoftClip(torch.autograd.Function):
    """A custom autograd.Function: tanh with its own backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


class FunctionNet(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(SoftClip.apply(self.bn(self.conv(x))).flatten(1)))


CASES = {"plain": Net, "owned-generator": OwnedGeneratorNet, "running-stat": RunningStatNet,
         "global-counter": GlobalCounterNet, "lstm": LSTMNet, "function": FunctionNet,
         "late-counter": LateCounterNet, "in-place-buffer": InPlaceBufferNet, "history": HistoryNet,
         "class-counter": ClassCounterNet}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=48)
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--clip", type=float, default=0.5)
    p.add_argument("--jitter", action="store_true")
    p.add_argument("--opt-counter", action="store_true", help="count micro-batches on the optimizer object")
    p.add_argument("--data-rng", choices=["", "python", "numpy", "counter"], default="",
                   help="the data set draws from a generator of its own (counter: counts its reads instead)")
    p.add_argument("--from-epoch-0", action="store_true", help="the resume mistake: the epoch loop starts at 0")
    p.add_argument("--case", choices=sorted(CASES), default="plain")
    p.add_argument("--sched", choices=["onecycle", "lambda", "plateau", "step"], default="onecycle")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse(sys.argv[1:] if argv is None else argv)
    dist.init_process_group("gloo")
    # TOYLOOP_INIT_SEED (tests of easyscale verify): other initial weights for the same job identity.
    torch.manual_seed(int(os.environ.get("TOYLOOP_INIT_SEED", "7")))
    model = DDP(CASES[args.case]())
    train = Images(args.samples, args.jitter, args.data_rng)
    sampler = DistributedSampler(train, shuffle=True, seed=7)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    lr_sched = torch.optim.lr_scheduler
    if args.sched == "onecycle":
        sched = lr_sched.OneCycleLR(opt, max_lr=0.1, total_steps=args.epochs * len(loader))
    elif args.sched == "lambda":
        decay = 0.8
        sched = lr_sched.LambdaLR(opt, lambda step: decay ** step)  # a closure: not in its state_dict
    elif args.sched == "plateau":
        sched = lr_sched.ReduceLROnPlateau(opt, factor=0.5, patience=0)
    else:
        sched = lr_sched.StepLR(opt, step_size=1, gamma=0.5)
    progress = {"steps": 0, "norms": []}
    register(opt, sched, progress)
    for epoch in range(0 if args.from_epoch_0 else loader.epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:
            opt.zero_grad(set_to_none=True)
            for x, y in batch:
                if args.opt_counter:  # a plain attribute on the optimizer, outside its state_dict()
                    opt.micro_batches = getattr(opt, "micro_batches", 0) + 1
                batch.backward(F.cross_entropy(model(x), y))
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            if args.sched == "plateau":
                sched.step(batch.loss)  # the mean loss over all logical workers: the same in every process
            elif args.sched != "step":
                sched.step()
            progress["steps"] += 1
            progress["norms"].append(float(norm))
        if args.sched == "step":
            sched.step()  # per epoch, at the epoch's end
    return {"model": model, "progress": progress, "loader": loader}


if __name__ == "__main__":
    main()
