"""The job's pinned numerics, a worker's fingerprint and the canary digest.

What changes torch's bits on one input (docs/pytorch-bits.md §2): the
intra-op thread count, the instruction-set dispatch of ATen
(``ATEN_CPU_CAPABILITY``), oneDNN (``ONEDNN_MAX_CPU_ISA``, also spelt
``DNNL_MAX_CPU_ISA``, and the CPU's own features: :func:`cpu_isa`) and OpenBLAS
(``OPENBLAS_CORETYPE``), nondeterministic CUDA kernels (deterministic
algorithms, ``CUBLAS_WORKSPACE_CONFIG``, cudnn.benchmark) and the torch build.
The Go worker sets the environment variables before it starts Python
(:data:`PINNED_ENV`); :func:`pin` sets the rest in-process. Before a worker is
admitted it reports :func:`versions`, :func:`fingerprint` and
:func:`canary_digest`; the coordinator refuses one whose torch or Python
version differs from the group's, naming both versions, and one whose
fingerprint or canary differs from the job's, naming the setting.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from typing import Any

import torch

__all__ = ["PINNED_ENV", "ISA_FEATURES", "cpu_isa", "pin", "versions", "require_device", "fingerprint", "canary_digest", "differences"]

#: Environment variables that change bits; the Go side gives every worker of a job the same values.
PINNED_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY",
              "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE", "CUBLAS_WORKSPACE_CONFIG")

#: The CPU features whose presence changes which kernels ATen, oneDNN and OpenBLAS dispatch to (x86-64
#: flags and arm64 features as /proc/cpuinfo names them; oneDNN's ISA levels up to avx512_core_amx_fp16
#: and avx2_vnni_2). oneDNN runs a convolution with AVX-512 kernels
#: where the CPU has them and AVX2 ones where not, with other bits (a tester's finding: torch 1.13's
#: cpu_capability reads AVX2 on both, and the canary's convolution gave the same bits), so a CPU job's
#: fingerprint names the features its CPU has (:func:`cpu_isa`).
ISA_FEATURES = ("sse4_1", "sse4_2", "avx", "f16c", "fma", "avx2", "avx_vnni", "avx_vnni_int8", "avx_ne_convert",
                "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "asimd", "asimddp", "asimdhp", "bf16", "i8mm", "sve",
                "sve2")


def cpu_isa(cpuinfo: str | None = None) -> str:
    """The :data:`ISA_FEATURES` this CPU has, space-separated in that order ("unknown" when
    /proc/cpuinfo cannot be read); ``cpuinfo`` is the file's text (tests)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return "unknown"
    m = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    if m is None:
        return "unknown"
    have = set(m.group(1).split())
    return " ".join(f for f in ISA_FEATURES if f in have)


def pin(threads: int) -> None:
    """Set torch's in-process numerics: ``threads`` intra-op threads, deterministic algorithms,
    cudnn.benchmark off. Raises ValueError for threads < 1."""
    if threads < 1:
        raise ValueError(f"threads = {threads}: want at least 1")
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def versions() -> dict[str, str]:
    """``{"torch": torch.__version__, "python": "MAJOR.MINOR"}``: what every process of a group must share.

    A kernel's bits may change between torch releases, so a job's digests hold
    for one torch version; the coordinator refuses a joiner whose versions
    differ from the group's (``runtime/torchengine.VersionError``).
    """
    return {"torch": str(torch.__version__), "python": f"{sys.version_info.major}.{sys.version_info.minor}"}


def _cpu_capability() -> str:
    m = re.search(r"CPU capability usage: ([^\n]+)", torch.__config__.show())
    return m.group(1).strip() if m else "unknown"


def _blas() -> str:
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return m.group(1).strip() if m else "unknown"


def require_device(device: str) -> None:
    """Raise ValueError naming ``[torch] device`` and the fix when this torch cannot run on ``device``
    ("cuda" where torch is built without CUDA or sees no GPU)."""
    if torch.device(device).type != "cuda" or torch.cuda.is_available():
        return
    why = ("this torch is built without CUDA" if torch.version.cuda is None
           else "torch sees no GPU (none given to the task, or no driver)")
    raise ValueError(f'[torch] device = "{device}" but {why} (torch {torch.__version__}, {sys.executable}): '
                     f'set device = "cpu", or run where torch has a GPU (EASYSCALE_PYTHON names the interpreter)')


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """What this process computes with: torch version, threads, BLAS, ISA dispatch, device.

    Keys and values are JSON-serialisable; two workers compute the same bits
    only when :func:`differences` of their fingerprints is empty.
    """
    fp: dict[str, Any] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": _blas(),
        "cpu_capability": _cpu_capability(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "device": device,
    }
    for name in PINNED_ENV:
        fp["env." + name] = os.environ.get(name, "")
    if torch.device(device).type == "cpu":
        fp["cpu_isa"] = cpu_isa()
    if device.startswith("cuda"):
        fp["cuda"] = torch.version.cuda
        fp["device_name"] = torch.cuda.get_device_name(torch.device(device))
        fp["cudnn"] = torch.backends.cudnn.version()
    return fp


def differences(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """The settings in which ``got`` differs from ``want``, as 'key: want X, got Y' lines."""
    keys = sorted(set(want) | set(got))
    return [f"{k}: want {want.get(k)!r}, got {got.get(k)!r}" for k in keys if want.get(k) != got.get(k)]


def canary_digest(device: str = "cpu") -> str:
    """sha256 of the gradients of a fixed conv + LayerNorm + linear computation.

    The inputs come from a private generator, so the digest depends only on the
    numerics (threads, ISA dispatch, BLAS, kernels), not on the global RNG.
    """
    g = torch.Generator().manual_seed(20220830)
    dev = torch.device(device)
    x = torch.randn(4, 3, 12, 12, generator=g).to(dev)
    conv_w = torch.randn(8, 3, 3, 3, generator=g).to(dev).requires_grad_()
    lin_w = torch.randn(10, 8 * 10 * 10, generator=g).to(dev).requires_grad_()
    ln = torch.nn.LayerNorm([8, 10, 10]).to(dev)
    y = torch.nn.functional.conv2d(x, conv_w)
    y = ln(y).relu().flatten(1) @ lin_w.t()
    loss = torch.nn.functional.cross_entropy(y, torch.arange(4, device=dev) % 10)
    loss.backward()
    h = hashlib.sha256()
    for t in (loss.detach(), conv_w.grad, lin_w.grad, ln.weight.grad, ln.bias.grad):
        assert t is not None
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return "sha256:" + h.hexdigest()
