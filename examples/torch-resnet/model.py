"""torchvision's ResNet-18 on MNIST padded to 32x32x3, written as plain PyTorch (the GPU check's model).

The data are the torch MNIST example's idx files, read offline from
config.params["data_dir"]: each 28x28 digit is padded to 32x32 with the
background and repeated to 3 channels, the input shape of CIFAR-10. The
model is ``torchvision.models.resnet18(num_classes=10)`` (BatchNorm in every
block; the runtime keeps its running statistics per logical worker) with two
changes:

- ``stem = "cifar"`` (the default) makes conv1 3x3 stride 1 and drops the
  max-pool, as ResNet-18 is run on 32x32 inputs (11,173,962 parameters);
  ``stem = "imagenet"`` keeps torchvision's 7x7/2 conv and max-pool
  (16x less compute, for quick CPU runs);
- the global average pool is ``x.mean((2, 3))``, not ``AdaptiveAvgPool2d``:
  the latter's CUDA backward has no deterministic implementation, so
  ``torch.use_deterministic_algorithms(True)`` (which the runtime sets)
  refuses it on a GPU. On the CPU the two give the same values.

Training: SGD with momentum 0.9 and weight decay 5e-4, linear warm-up then
cosine decay; augmentation is a random shift of up to ``augment_shift``
pixels drawn from the runtime's per-sample generator. ``train_samples`` /
``test_samples`` (0: all) take the first samples only, for quick checks. Run it:

    bin/easyscale run --config examples/torch-resnet/job.toml --workers 0:2,20:4
"""

from __future__ import annotations

import gzip
import math
import os
import struct

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

import easyscale

MEAN, STD = 0.1307, 0.3081
BACKGROUND = (0 - MEAN) / STD


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


class MNIST32(torch.utils.data.Dataset):
    """MNIST as 3x32x32 float images (normalized, padded with the background), and labels."""

    def __init__(self, data_dir: str, split: str, limit: int = 0) -> None:
        prefix = "train" if split == "train" else "t10k"
        images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
        if limit > 0:
            images, labels = images[:limit], labels[:limit]
        self.images = F.pad(images, (2, 2, 2, 2))  # uint8 zeros: the background
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].to(torch.float32).div(255).sub(MEAN).div(STD)
        return x.unsqueeze(0).expand(3, -1, -1), int(self.labels[i])


def random_shift(max_shift: int):
    """Shift the image by up to max_shift pixels each way, filling with the background."""
    def shift(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        dy, dx = torch.randint(-max_shift, max_shift + 1, (2,), generator=g).tolist()
        out = torch.full_like(x, BACKGROUND)
        h, w = x.shape[-2:]
        out[..., max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            x[..., max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
        return out
    return shift


class GlobalMean(nn.Module):
    """Global average pooling as a mean (deterministic backward on CUDA, unlike AdaptiveAvgPool2d)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3), keepdim=True)


def resnet18(stem: str = "cifar") -> nn.Module:
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")  # as torchvision does
        model.maxpool = nn.Identity()
    elif stem != "imagenet":
        raise ValueError(f"torch.params.stem = {stem!r}: want \"cifar\" or \"imagenet\"")
    model.avgpool = GlobalMean()
    return model


def setup(config: easyscale.Config) -> easyscale.Job:
    p = config.params
    torch.manual_seed(config.seed)  # initial weights: the same in every process
    model = resnet18(str(p.get("stem", "cifar")))
    lr, warmup, min_lr = float(p.get("lr", 0.05)), int(p.get("warmup_steps", 20)), float(p.get("min_lr", 0.0))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)

    def warmup_cosine(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, config.steps - warmup)
        return (min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))) / lr
    data_dir = str(p["data_dir"])
    return easyscale.Job(model=model, optimizer=opt, lr_scheduler=torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine),
                         loss=F.cross_entropy,
                         train_set=MNIST32(data_dir, "train", int(p.get("train_samples", 0))),
                         test_set=MNIST32(data_dir, "test", int(p.get("test_samples", 0))),
                         transform=random_shift(int(p.get("augment_shift", 2))))
