import unittest

import torch
from torch import nn

from easyscale.context import BufferBank


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


class Buffers(unittest.TestCase):
    def test_each_logical_worker_counts_its_own_batches(self) -> None:
        torch.manual_seed(0)
        m = _model().train()
        bank = BufferBank(m, [0, 1, 2])
        x = torch.randn(8, 3)
        bank.activate(0)
        m(x)
        bank.activate(1)
        m(x)
        m(x)
        self.assertEqual(bank.buffers(0)["1.num_batches_tracked"].item(), 1)
        self.assertEqual(bank.buffers(1)["1.num_batches_tracked"].item(), 2)
        self.assertEqual(bank.buffers(2)["1.num_batches_tracked"].item(), 0)
        self.assertEqual(bank.names(), ["1.running_mean", "1.running_var", "1.num_batches_tracked"])

    def test_restore_undoes_an_aborted_step(self) -> None:
        m = _model().train()
        bank = BufferBank(m, [0])
        bank.activate(0)
        live = bank.buffers(0)["1.running_mean"]
        before = live.clone()
        snap = bank.snapshot()
        m(torch.randn(8, 3))
        self.assertFalse(torch.equal(live, before))
        bank.restore(snap)
        self.assertTrue(torch.equal(live, before))
        self.assertIs(bank.buffers(0)["1.running_mean"], live)

    def test_a_snapshot_holds_every_logical_workers_buffers_bit_for_bit_after_moves(self) -> None:
        m = _model().train()
        m.register_buffer("grid", torch.arange(6.0).reshape(2, 3).t())  # not contiguous
        bank = BufferBank(m, [0, 1, 2])
        for lw in (0, 1, 2):
            bank.activate(lw)
            for _ in range(lw + 1):
                m(torch.randn(8, 3))
            bank.buffers(lw)["grid"].add_(lw)
        bank.buffers(2)["1.running_mean"][0] = -0.0
        bank.add(5, bank.remove(1))  # the layout changes with the logical workers held
        want = {lw: {k: t.clone() for k, t in bank.buffers(lw).items()} for lw in bank}
        snap = bank.snapshot()
        for lw in (0, 2, 5):
            bank.activate(lw)
            m(torch.randn(8, 3))
            bank.buffers(lw)["grid"].mul_(7)
        self.assertEqual(sorted(lw for lw, _ in snap.items()), [0, 2, 5])
        for lw, bufs in want.items():
            self.assertEqual(list(snap[lw]), list(bufs))
            for k, t in bufs.items():
                got = snap[lw][k]
                self.assertEqual((got.dtype, got.shape), (t.dtype, t.shape), (lw, k))
                self.assertTrue(torch.equal(got.reshape(-1).view(torch.uint8) if got.dim() else got,
                                            t.reshape(-1).view(torch.uint8) if t.dim() else t), (lw, k))
        live = bank.buffers(2)["1.running_mean"]
        bank.restore(snap)
        self.assertIs(bank.buffers(2)["1.running_mean"], live)
        self.assertEqual(torch.signbit(live[0]).item(), True)  # -0.0 came back as -0.0
        for lw, bufs in want.items():
            for k, t in bufs.items():
                self.assertTrue(torch.equal(bank.buffers(lw)[k], t), (lw, k))

    def test_moving_a_logical_worker_keeps_its_buffers(self) -> None:
        m1, m2 = _model().train(), _model().train()
        a, b = BufferBank(m1, [0, 1]), BufferBank(m2, [])
        a.activate(1)
        m1(torch.randn(8, 3))
        moved = a.remove(1)
        b.add(1, moved)
        self.assertEqual(b.logical_workers(), [1])
        self.assertTrue(torch.equal(b.buffers(1)["1.running_var"], moved["1.running_var"]))

    def test_foreign_buffers_are_refused_naming_the_buffer(self) -> None:
        bank = BufferBank(_model(), [])
        with self.assertRaisesRegex(KeyError, "1.running_var"):
            bank.add(0, {"1.running_mean": torch.zeros(4), "1.num_batches_tracked": torch.tensor(0)})
        good = {k: v.clone() for k, v in BufferBank(_model(), [0]).buffers(0).items()}
        good["1.running_mean"] = torch.zeros(5)
        with self.assertRaisesRegex(ValueError, "1.running_mean"):
            bank.add(0, good)


if __name__ == "__main__":
    unittest.main()
