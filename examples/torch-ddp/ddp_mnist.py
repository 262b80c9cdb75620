"""MNIST with a LeNet (BatchNorm, dropout), SGD, OneCycleLR per step or StepLR per epoch, gradient clipping,
batch-wise augmentation, periodic evaluation and logging. examples/torch-ddp/README.md says how to run it.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import struct

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

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
    def __init__(self, data_dir: str, split: str, limit: int = 0) -> None:
        prefix = "train" if split == "train" else "t10k"
        self.images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
        self.labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
        if limit:
            self.images, self.labels = self.images[:limit], self.labels[:limit]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].to(torch.float32).div(255).sub(MEAN).div(STD)
        return x.unsqueeze(0), int(self.labels[i])


def random_shift(x: torch.Tensor, max_shift: int) -> torch.Tensor:
    """Shift each image of the batch by up to max_shift pixels (drawn from the global generator)."""
    n, _, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4, value=(0 - MEAN) / STD)
    d = torch.randint(0, 2 * max_shift + 1, (n, 2)).tolist()
    return torch.stack([padded[i, :, dy:dy + h, dx:dx + w] for i, (dy, dx) in enumerate(d)])


class LeNet(nn.Module):
    def __init__(self, channels: tuple[int, int] = (8, 16), hidden: int = 128, dropout: float = 0.25) -> None:
        super().__init__()
        c1, c2 = channels
        self.conv1, self.bn1 = nn.Conv2d(1, c1, 5, padding=2), nn.BatchNorm2d(c1)
        self.conv2, self.bn2 = nn.Conv2d(c1, c2, 5), nn.BatchNorm2d(c2)
        self.fc1, self.drop, self.fc2 = nn.Linear(c2 * 5 * 5, hidden), nn.Dropout(dropout), nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    device = next(model.parameters()).device
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss_sum += F.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        total += len(y)
    model.train()
    return loss_sum / total, correct / total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", required=True, help="directory of MNIST's four idx files")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--schedule", choices=["onecycle", "step"], default="onecycle",
                   help="OneCycleLR stepped every step, or StepLR (gamma 0.5) stepped every epoch")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm")
    p.add_argument("--train-samples", type=int, default=0, help="the first N training images (0: all)")
    p.add_argument("--test-samples", type=int, default=0, help="the first N test images (0: all)")
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, or cuda: each rank on GPU LOCAL_RANK of its node")
    p.add_argument("--out", default="", help="save the trained model's state_dict here")
    args = p.parse_args()

    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    train = MNIST(args.data, "train", args.train_samples)
    test = MNIST(args.data, "test", args.test_samples)
    sampler = DistributedSampler(train, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    test_loader = DataLoader(test, batch_size=1000)
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    model = DDP(LeNet().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    if args.schedule == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * len(loader))
    else:
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(random_shift(x, 2).to(device)), y.to(device))
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            if args.schedule == "onecycle":
                sched.step()
            step += 1
            if dist.get_rank() == 0 and step % args.log_every == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} grad_norm {norm:.3f} "
                      f"lr {sched.get_last_lr()[0]:.5f}", flush=True)
            if dist.get_rank() == 0 and step % args.eval_every == 0:
                print("step {} test_loss {:.4f} test_accuracy {:.4f}".format(step, *evaluate(model.module, test_loader)),
                      flush=True)
        if args.schedule == "step":
            sched.step()
    if dist.get_rank() == 0:
        print("final test_loss {:.4f} test_accuracy {:.4f}".format(*evaluate(model.module, test_loader)), flush=True)
        if args.out:
            torch.save(model.module.state_dict(), args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
