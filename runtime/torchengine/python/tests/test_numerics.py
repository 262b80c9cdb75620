import json
import os
import subprocess
import sys
import unittest

import torch

from easyscale import numerics

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _probe(env: dict[str, str], threads: int) -> tuple[dict, str]:
    code = ("import json, easyscale.numerics as n; n.pin(%d); "
            "print(json.dumps([n.fingerprint(), n.canary_digest()]))" % threads)
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": _HERE, **env},
                         check=True, capture_output=True, text=True).stdout
    import json
    fp, digest = json.loads(out)
    return fp, digest


class Versions(unittest.TestCase):
    def test_versions_are_torch_s_own_and_the_interpreter_s_major_minor(self) -> None:
        v = numerics.versions()
        self.assertEqual(v, {"torch": str(torch.__version__),
                             "python": f"{sys.version_info.major}.{sys.version_info.minor}"})
        self.assertEqual(json.loads(json.dumps(v)), v)  # plain strings: torch.__version__ is a str subclass


class Canary(unittest.TestCase):
    def test_same_settings_give_the_same_canary_in_another_process(self) -> None:
        numerics.pin(1)
        fp, digest = _probe({}, 1)
        self.assertEqual(digest, numerics.canary_digest())
        self.assertEqual(numerics.differences(numerics.fingerprint(), fp), [])

    def test_thread_count_shows_in_the_fingerprint_and_the_difference_names_it(self) -> None:
        fp1, _ = _probe({}, 1)
        fp2, _ = _probe({}, 2)
        self.assertEqual(numerics.differences(fp1, fp2), ["threads: want 1, got 2"])

    def test_isa_dispatch_changes_the_canary(self) -> None:
        # NOTES §2: ATen's dispatch level changes conv/LayerNorm bits on this CPU.
        fp_avx2, avx2 = _probe({"ATEN_CPU_CAPABILITY": "avx2"}, 1)
        if fp_avx2["cpu_capability"] != "AVX2":
            self.skipTest(f"this CPU runs ATen at {fp_avx2['cpu_capability']}, not AVX2")
        fp, default = _probe({"ATEN_CPU_CAPABILITY": "default"}, 1)
        self.assertEqual(fp["cpu_capability"], "NO AVX")
        self.assertEqual(fp["env.ATEN_CPU_CAPABILITY"], "default")
        self.assertNotEqual(avx2, default)

    def test_a_device_torch_cannot_use_is_refused_naming_the_setting(self) -> None:
        numerics.require_device("cpu")
        if torch.cuda.is_available():
            self.skipTest("this torch has a GPU")
        with self.assertRaisesRegex(ValueError, r'\[torch\] device = "cuda" but .*set device = "cpu"'):
            numerics.require_device("cuda")

    def test_the_cpu_s_isa_features_are_read_in_a_fixed_order(self) -> None:
        x86 = "processor\t: 0\nflags\t\t: fpu avx512f sse4_2 avx2 fma avx sse4_1 ht\n"
        self.assertEqual(numerics.cpu_isa(x86), "sse4_1 sse4_2 avx fma avx2 avx512f")
        arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve asimddp\n"
        self.assertEqual(numerics.cpu_isa(arm), "asimd asimddp sve")
        self.assertEqual(numerics.cpu_isa("no such line\n"), "unknown")
        # A CPU job's fingerprint names its CPU's features; oneDNN's older variable name is recorded too.
        fp, _ = _probe({"DNNL_MAX_CPU_ISA": "AVX2"}, 1)
        self.assertEqual(fp["cpu_isa"], numerics.cpu_isa())
        self.assertEqual(fp["env.DNNL_MAX_CPU_ISA"], "AVX2")

    def test_pin_refuses_zero_threads(self) -> None:
        with self.assertRaisesRegex(ValueError, "threads = 0"):
            numerics.pin(0)


if __name__ == "__main__":
    unittest.main()
