import os
import struct
import tempfile
import unittest

import torch

from easyscale import safetensors as st


def _sample() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "f32": torch.randn(3, 4, generator=g),
        "bf16": torch.randn(5, generator=g).to(torch.bfloat16),
        "f16": torch.randn(2, 2, generator=g).to(torch.float16),
        "i64": torch.tensor([-(2**62), 0, 7, 2**62]),
        "scalar": torch.tensor(-0.0),
        "empty": torch.empty(0, 3),
        "flags": torch.tensor([True, False, True]),
        "noncontig": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
    }


class RoundTrip(unittest.TestCase):
    def test_every_dtype_round_trips_bit_exactly(self) -> None:
        tensors = _sample()
        got, meta = st.loads(st.dumps(tensors, {"step": "7"}))
        self.assertEqual(meta, {"step": "7"})
        self.assertEqual(sorted(got), sorted(tensors))
        for name, want in tensors.items():
            with self.subTest(name=name):
                self.assertEqual(got[name].dtype, want.dtype)
                self.assertEqual(got[name].shape, want.shape)
                a = want.contiguous().reshape(-1)
                b = got[name].reshape(-1)
                if a.dtype == torch.bool:
                    a, b = a.to(torch.uint8), b.to(torch.uint8)
                self.assertEqual(a.view(torch.uint8).tolist(), b.view(torch.uint8).tolist())

    def test_negative_zero_and_nan_payloads_keep_their_bits(self) -> None:
        bits = torch.tensor([-(2**31), 0x7FC00001, 0x7F800000], dtype=torch.int32)  # -0.0, a NaN payload, +inf
        t = bits.view(torch.float32)
        got, _ = st.loads(st.dumps({"t": t}))
        self.assertEqual(got["t"].view(torch.int32).tolist(), bits.tolist())

    def test_equal_tensors_give_identical_bytes(self) -> None:
        a = st.dumps(_sample(), {"k": "v"})
        b = st.dumps(dict(reversed(list(_sample().items()))), {"k": "v"})
        self.assertEqual(a, b)

    def test_header_is_8_byte_aligned(self) -> None:
        data = st.dumps({"x": torch.ones(3)})
        (hlen,) = struct.unpack("<Q", data[:8])
        self.assertEqual(hlen % 8, 0)

    def test_save_is_atomic_and_returns_the_bytes_written(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.safetensors")
            written = st.save(path, {"x": torch.ones(2)})
            with open(path, "rb") as f:
                self.assertEqual(f.read(), written)
            self.assertEqual(os.listdir(d), ["ckpt.safetensors"])


class Refusals(unittest.TestCase):
    def test_bad_inputs_name_the_problem(self) -> None:
        good = st.dumps({"a": torch.ones(2), "b": torch.zeros(1)})
        (hlen,) = struct.unpack("<Q", good[:8])
        cases = {
            "short file": (b"\x01\x00", "shorter than the 8-byte header"),
            "header past end": (struct.pack("<Q", 1 << 40) + b"{}", "runs past the end"),
            "not json": (struct.pack("<Q", 2) + b"{x", "not JSON"),
            "truncated data": (good[:-1], "outside"),
            "trailing bytes": (good + b"\x00\x00\x00\x00", "tensors cover"),
            "unknown dtype": (good[:8 + hlen].replace(b'"F32"', b'"F99"', 1) + good[8 + hlen:], "unknown dtype"),
        }
        for name, (data, want) in cases.items():
            with self.subTest(name=name):
                with self.assertRaisesRegex(st.SafetensorsError, want):
                    st.loads(data)

    def test_unsupported_dtype_is_refused(self) -> None:
        with self.assertRaisesRegex(st.SafetensorsError, "complex64"):
            st.dumps({"c": torch.zeros(2, dtype=torch.complex64)})

    def test_load_names_the_path(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.safetensors")
            with open(path, "wb") as f:
                f.write(b"xx")
            with self.assertRaisesRegex(st.SafetensorsError, "bad.safetensors"):
                st.load(path)


if __name__ == "__main__":
    unittest.main()
