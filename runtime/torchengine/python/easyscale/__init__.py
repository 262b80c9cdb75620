"""easyscale: elastic, accuracy-consistent PyTorch training under the EasyScale runtime.

This package ships inside the ``easyscale`` binary (the Go runtime writes it out
next to itself before it starts a worker), so the Go and Python halves are
always of one version. It needs nothing but torch.

Modules:
    safetensors  bit-exact reader/writer of the safetensors format (every dtype)
    streams      random streams keyed by (seed, logical worker, step, purpose)
    sampler      DistributedSampler-order cursor over N logical workers
    context      per-logical-worker buffers (BatchNorm) swapped into one replica
    numerics     pinned numerics, worker fingerprint and canary digest
"""

__version__ = "0.1.0"

from . import streams
from .job import Config, Job, JobError

__all__ = ["Config", "Job", "JobError", "streams"]
