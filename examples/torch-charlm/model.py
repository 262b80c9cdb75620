"""A small causal transformer over the characters of Newton's Opticks, in plain PyTorch.

The text ships with Go ($(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt);
the runtime passes its path as config.params["text"]. Sample i is the window
ids[i*L : i*L + L + 1] of the first 90% of the text (inputs and next-character
targets); the last 10% is the test set. Run it:

    bin/easyscale run --config examples/torch-charlm/job.toml --workers 0:1,60:3,150:2
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import easyscale


class Windows(torch.utils.data.Dataset):
    def __init__(self, ids: torch.Tensor, seq_len: int) -> None:
        self.ids, self.seq_len = ids, seq_len

    def __len__(self) -> int:
        return (len(self.ids) - 1) // self.seq_len

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.ids[i * self.seq_len: i * self.seq_len + self.seq_len + 1]
        return w[:-1], w[1:]


class CharLM(nn.Module):
    def __init__(self, vocab: int, seq_len: int, d_model: int, heads: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq_len, seq_len), float("-inf")), 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos[: x.shape[1]]
        h = self.blocks(h, mask=self.mask[: x.shape[1], : x.shape[1]])
        return self.head(self.norm(h))


def next_char_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def setup(config: easyscale.Config) -> easyscale.Job:
    p = config.params
    with open(str(p["text"]), "rb") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {b: i for i, b in enumerate(vocab)}
    ids = torch.tensor([index[b] for b in text], dtype=torch.int64)
    split = len(ids) - len(ids) // 10
    seq_len = int(p.get("seq_len", 64))
    torch.manual_seed(config.seed)  # initial weights: the same in every process
    model = CharLM(len(vocab), seq_len, int(p.get("d_model", 64)), int(p.get("heads", 4)), int(p.get("layers", 2)),
                   float(p.get("dropout", 0.1)))
    lr, warmup, min_lr = float(p.get("lr", 3e-3)), int(p.get("warmup_steps", 20)), float(p.get("min_lr", 3e-4))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)

    def warmup_cosine(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, config.steps - warmup)
        return (min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))) / lr
    return easyscale.Job(model=model, optimizer=opt, lr_scheduler=torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine),
                         loss=next_char_loss, train_set=Windows(ids[:split], seq_len),
                         test_set=Windows(ids[split:], seq_len))
