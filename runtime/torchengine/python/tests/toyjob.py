"""A small job for the engine's tests: conv + BatchNorm + dropout on synthetic 8x8 images, with augmentation."""

import os
import sys
import time

import torch
from torch import nn

import easyscale


class Images(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(99)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.x[i], int(self.y[i])


def flip(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return x.flip(-1) if torch.rand((), generator=g) < 0.5 else x


def setup(config: easyscale.Config) -> easyscale.Job:
    gil = os.environ.get("TOYJOB_SETUP_HOLDS_GIL_S")
    if gil:
        # Tests of a setup that holds Python's GIL in one C call (pandas.read_csv, a C extension's import):
        # TOYJOB_SETUP_HOLDS_GIL_S=SECONDS calls libc's sleep through ctypes.PyDLL, which keeps the GIL, so the
        # heartbeat thread is silent that long.
        import ctypes
        ctypes.PyDLL(None).sleep(ctypes.c_uint(int(gil)))
    torch.manual_seed(config.seed)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Dropout(0.3), nn.Linear(4 * 6 * 6, 3))
    # params.frozen_floats adds a frozen parameter of that many float32 zeros: hashed into the digest with the
    # rest, never trained, so the ledger's hashing costs more than a step (tests of the digest interval).
    frozen = int(config.params.get("frozen_floats", 0))
    if frozen:
        model.register_parameter("frozen", nn.Parameter(torch.zeros(frozen), requires_grad=False))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    # Tests of a slow step: TOYJOB_SLOW=AFTER:SECONDS[:COUNT] makes every forward of this process after the first
    # AFTER (only the COUNT next ones, when given) sleep SECONDS (an environment variable, so the job's identity
    # does not change).
    after, _, rest = os.environ.get("TOYJOB_SLOW", "").partition(":")
    seconds, _, count = rest.partition(":")
    if after:
        forward, calls = model.forward, [0]

        def slow_forward(x: torch.Tensor) -> torch.Tensor:
            calls[0] += 1
            if calls[0] > int(after) and (not count or calls[0] <= int(after) + int(count)):
                print(f"toyjob: slow forward {calls[0]}", file=sys.stderr, flush=True)
                time.sleep(float(seconds or 2))
            return forward(x)
        model.forward = slow_forward  # type: ignore[method-assign]
    version = os.environ.get("TOYJOB_TORCH_VERSION")
    if version:
        # Tests of a worker on another torch: TOYJOB_TORCH_VERSION=V makes this process report torch V (load
        # reads torch.__version__ after setup), as a node with another python3-torch would.
        torch.__version__ = version  # type: ignore[assignment]
    hold = os.environ.get("TOYJOB_HOLD_GROUP")
    if hold:
        # Tests of a member lost while a process group forms: TOYJOB_HOLD_GROUP=SECONDS holds this process
        # SECONDS before it arrives at its first rendezvous (the others wait for it there).
        import easyscale.rendezvous as rendezvous
        arrive, held = rendezvous.arrive, [False]

        def held_arrive(store, rank: int, size: int) -> None:
            if not held[0]:
                held[0] = True
                print(f"toyjob: holding rank {rank} of {size} before the rendezvous", file=sys.stderr, flush=True)
                time.sleep(float(hold))
            arrive(store, rank, size)
        rendezvous.arrive = held_arrive
    return easyscale.Job(model=model, optimizer=opt, train_set=Images(int(config.params.get("samples", 50))),
                         loss=nn.functional.cross_entropy, transform=flip, lr_scheduler=sched)
