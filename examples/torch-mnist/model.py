"""MNIST with a LeNet-style CNN (BatchNorm + dropout), written as plain PyTorch.

The only easyscale-specific parts are setup()'s signature and return value and
the transform's generator argument; the training loop, DataLoader,
DistributedSampler, DDP and seeding are the runtime's. Run it:

    bin/easyscale run --config examples/torch-mnist/job.toml --workers 0:2,60:4,120:1

The data are MNIST's idx files (train-images-idx3-ubyte.gz, ...), read from
config.params["data_dir"] without any download.
"""

from __future__ import annotations

import gzip
import math
import os
import struct

import torch
import torch.nn.functional as F
from torch import nn

import easyscale

MEAN, STD = 0.1307, 0.3081


def read_idx(path: str) -> torch.Tensor:
    """Read an idx file (gzip'd or not) into a uint8 tensor of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an idx file of unsigned bytes")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    body = data[4 + 4 * dims:]
    if len(body) != math.prod(shape):
        raise ValueError(f"{path}: {len(body)} bytes of data for shape {shape}")
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


class MNIST(torch.utils.data.Dataset):
    def __init__(self, data_dir: str, split: str) -> None:
        prefix = "train" if split == "train" else "t10k"
        self.images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
        self.labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].to(torch.float32).div(255).sub(MEAN).div(STD)
        return x.unsqueeze(0), int(self.labels[i])


def random_shift(max_shift: int):
    def shift(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        dy, dx = (torch.randint(-max_shift, max_shift + 1, (2,), generator=g)).tolist()
        background = (0 - MEAN) / STD
        out = torch.full_like(x, background)
        h, w = x.shape[-2:]
        out[..., max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            x[..., max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
        return out
    return shift


class LeNet(nn.Module):
    def __init__(self, channels: tuple[int, int], hidden: int, dropout: float) -> None:
        super().__init__()
        c1, c2 = channels
        self.conv1, self.bn1 = nn.Conv2d(1, c1, 5, padding=2), nn.BatchNorm2d(c1)
        self.conv2, self.bn2 = nn.Conv2d(c1, c2, 5), nn.BatchNorm2d(c2)
        self.fc1, self.drop, self.fc2 = nn.Linear(c2 * 5 * 5, hidden), nn.Dropout(dropout), nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


def setup(config: easyscale.Config) -> easyscale.Job:
    p = config.params
    torch.manual_seed(config.seed)  # initial weights: the same in every process
    model = LeNet(tuple(p.get("channels", (8, 16))), int(p.get("hidden", 128)), float(p.get("dropout", 0.25)))
    lr, warmup, min_lr = float(p.get("lr", 0.1)), int(p.get("warmup_steps", 20)), float(p.get("min_lr", 0.0))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)

    def warmup_cosine(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, config.steps - warmup)
        return (min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))) / lr
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)
    data_dir = str(p["data_dir"])
    return easyscale.Job(model=model, optimizer=opt, lr_scheduler=sched, loss=F.cross_entropy,
                         train_set=MNIST(data_dir, "train"), test_set=MNIST(data_dir, "test"),
                         transform=random_shift(int(p.get("augment_shift", 2))))
