"""easyscale: elastic, accuracy-consistent PyTorch training under the EasyScale runtime.

This package ships inside the ``easyscale`` binary (the Go runtime writes it out
next to itself before it starts a worker), so the Go and Python halves are
always of one version. It needs nothing but torch.

Two ways to write a job, one engine:

- the loop API (:mod:`easyscale.loop`): a DDP training script keeps its loop,
  optimizer, scheduler, clipping, logging and evaluation; ``DataLoader``,
  ``DistributedSampler`` and ``DistributedDataParallel`` from here and
  ``easyscale.distributed`` for ``torch.distributed`` are the drop-ins, and
  ``register`` names what else has state;
- the Job API (:mod:`easyscale.job`): a module's ``setup(config) -> Job``
  gives the pieces, and :func:`easyscale.job.run` is the loop that trains
  them, written with the loop API.

Modules:
    loop         the loop API: the step's micro-batch loop, registration, the drop-ins
    distributed  the part of torch.distributed a DDP script calls
    job          the Job API and its loop
    selfcheck    the consistency self-check: two placements compared bit for bit
    replica      a process's replica: logical workers, their contexts, one step's micro-batch loop
    safetensors  bit-exact reader/writer of the safetensors format (every dtype)
    state        registered state and logical-worker contexts as safetensors bytes
    streams      random streams keyed by (seed, logical worker, step, purpose)
    sampler      DistributedSampler-order cursor over N logical workers
    context      per-logical-worker buffers (BatchNorm) swapped into one replica
    numerics     pinned numerics, worker fingerprint and canary digest
    worker       a worker process: the control protocol's requests served
    forkserver   imports torch once and forks the worker processes
"""

__version__ = "0.2.0"

from . import streams
from .job import Config, Job, JobError
from .loop import Batch, DataLoader, DistributedDataParallel, DistributedSampler, config, device, register

__all__ = ["Config", "Job", "JobError", "streams", "Batch", "DataLoader", "DistributedDataParallel",
           "DistributedSampler", "config", "device", "register"]
