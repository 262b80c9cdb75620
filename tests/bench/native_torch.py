"""PyTorch twins of the native engine's two example models; prints `name value unit` lines.

    python3 native_torch.py OPTICKS_PATH [REPEATS]

Run by tests/bench/native.go (suite `native`) for native_vs_torch_step_ratio:
one training step of 8 micro-batches, plain gradient accumulation, one
intra-op thread, on exactly the layers, shapes, initial-value ranges and
optimizer of runtime/models (LeNet, CharLM) with the settings of
runtime/trainer's BenchmarkStep and BenchmarkStepCharLM:

  lenet:  conv 5x5 1->8 (no bias, no padding) -> BatchNorm2d -> ReLU -> maxpool 2
          -> conv 5x5 8->16 (no bias) -> BatchNorm2d -> ReLU -> maxpool 2
          -> linear 256->128 -> ReLU -> dropout 0.25 -> linear 128->10, cross-entropy;
          8 micro-batches of 32 images 1x28x28; SGD lr 0.1, momentum 0.9, Nesterov,
          weight decay 5e-4.
  charlm: token + learned position embeddings (d 64), 2 pre-LayerNorm blocks of
          causal 4-head self-attention (one qkv linear, output projection) and a
          tanh-GELU MLP 64->256->64, dropout 0.1 after both sublayers, final
          LayerNorm, linear head to the Opticks vocabulary, cross-entropy over
          every position; 8 micro-batches of 8 windows of 64 characters; AdamW
          lr 3e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.01.

The inputs are fixed random tensors of the right shapes and ranges, made before
the clock starts: the native step's time includes its data path (decoding
MNIST samples, the random shift, building windows), this one's does not, which
can only favour PyTorch. Each figure is the fastest of REPEATS steps after two
untimed ones, by the process CPU clock (time.process_time, as the native
benchmark's min-cpu-ns/step) and by the wall clock, with the garbage collector
paused during each step.
"""

from __future__ import annotations

import gc
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

MICRO_BATCHES = 8


class LeNet(nn.Module):
    """runtime/models.LeNet with channels (8, 16), hidden 128, dropout 0.25."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 5, bias=False), nn.BatchNorm2d(8, eps=1e-5, momentum=0.1)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 5, bias=False), nn.BatchNorm2d(16, eps=1e-5, momentum=0.1)
        self.fc1, self.drop, self.fc2 = nn.Linear(16 * 4 * 4, 128), nn.Dropout(0.25), nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2, 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2, 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


class Block(nn.Module):
    """One pre-LayerNorm block of runtime/models.CharLM."""

    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d, eps=1e-5), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.out = nn.LayerNorm(d, eps=1e-5), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(a))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class CharLM(nn.Module):
    """runtime/models.CharLM with d 64, 4 heads, 2 layers, dropout 0.1."""

    def __init__(self, vocab: int, seq_len: int, d: int = 64, heads: int = 4, layers: int = 2,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.empty(seq_len, d).uniform_(-0.02 * 3 ** 0.5, 0.02 * 3 ** 0.5))
        nn.init.uniform_(self.tok.weight, -0.02 * 3 ** 0.5, 0.02 * 3 ** 0.5)
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d, eps=1e-5), nn.Linear(d, vocab)
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.head(self.ln_f(x))


def step(model: nn.Module, opt: torch.optim.Optimizer, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """One step: plain accumulation of the micro-batches, gradients scaled by 1/N, the optimizer."""
    model.train()
    for x, y in batches:
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(1.0 / len(batches))
    opt.step()
    opt.zero_grad(set_to_none=True)


def fastest(model: nn.Module, opt: torch.optim.Optimizer, batches: list, repeats: int) -> tuple[float, float]:
    """The fastest of ``repeats`` steps (after two untimed ones): (CPU seconds, wall seconds)."""
    cpu = wall = float("inf")
    gc.disable()
    try:
        for i in range(2 + repeats):
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            step(model, opt, batches)
            c1, w1 = time.process_time(), time.perf_counter()
            if i >= 2:
                cpu, wall = min(cpu, c1 - c0), min(wall, w1 - w0)
    finally:
        gc.enable()
    return cpu, wall


def lenet(repeats: int) -> tuple[float, float]:
    g = torch.Generator().manual_seed(1)
    model = LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    batches = [(torch.randn(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g))
               for _ in range(MICRO_BATCHES)]
    return fastest(model, opt, batches, repeats)


def charlm(opticks: str, repeats: int) -> tuple[float, float]:
    with open(opticks, "rb") as f:
        vocab = len(set(f.read()))
    g = torch.Generator().manual_seed(1)
    model = CharLM(vocab, 64)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)
    batches = [(torch.randint(0, vocab, (8, 64), generator=g), torch.randint(0, vocab, (8, 64), generator=g))
               for _ in range(MICRO_BATCHES)]
    return fastest(model, opt, batches, repeats)


def main() -> None:
    opticks = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    for name, (cpu, wall) in (("lenet", lenet(repeats)), ("charlm", charlm(opticks, repeats))):
        print(f"torch_step_cpu_ms_{name} {1e3 * cpu:.3f} ms")
        print(f"torch_step_ms_{name} {1e3 * wall:.3f} ms")


if __name__ == "__main__":
    main()
