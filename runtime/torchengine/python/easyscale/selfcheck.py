"""The consistency self-check: a few steps run twice under two placements, compared bit for bit.

Before a job's first step (and by ``easyscale check JOBFILE``) the process
that holds logical worker 0 takes every logical worker and runs K steps of
the training loop itself twice, from the same state:

- placement A: logical workers 0..N-1 in increasing order, the gradient
  folded by autograd's accumulation (one process holding them all);
- placement B: the upper half first, then the lower (N/2..N-1, 0..N/2-1), each
  gradient in its own slot, folded in logical-worker order (two processes'
  worth, in another order).

A job whose bits do not depend on the placement ends both with the same
parameters, buffers of every logical worker, cursors, optimizer, scheduler and
every other registered object's state, and leaves every plain attribute below
as it found it. Anything else is refused, naming the first tensor or
attribute that differed or changed and the likely cause:

- an attribute of a model module that is a plain tensor (not a registered
  buffer), or of a model module or the data set that is a number, flag,
  string, list, tuple, dict or set, and changes during training: it is kept
  per process, not per logical worker, and no checkpoint holds it (an
  unregistered running statistic, a call counter, a history list);
- a generator the model or the data set owns (a ``torch.Generator``, a
  ``random.Random``, a numpy ``Generator`` or ``RandomState``): its draws
  depend on which logical workers ran before in the process (the runtime
  seeds the global generators per logical worker and step, not one the
  model owns);
- otherwise a global: state outside the registered objects that the model,
  the loss or the data changes (a module-level variable, a cache).

Plain attributes and owned generators are put back between the two runs, so
the difference comes from the placement alone; afterwards everything is put
back as it was (registered state, contexts, attributes, the global
generators), so the job trains as if the check had not run. The loop runs
the check's steps as any other (its output shows them, with their step
numbers); K is at most 2 and stays inside the current epoch and the job
(a job resumed at an epoch's last step is not checked, and the result says
so).
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from typing import Any, Callable

import torch
from torch import nn

from . import reduce, safetensors
from .loop import Reduced, Session, StepOrder, mean_loss
from .replica import StepRun

__all__ = ["SelfCheck", "DEFAULT_STEPS"]

#: Steps run in each placement unless the check asks for others.
DEFAULT_STEPS = 2


class SelfCheck:
    """A driver of the loop API that runs the check's steps, then hands the loop back to ``back``.

    ``contexts`` are the logical workers' contexts to start from (logical
    worker -> {"cursor", "buffers"}; a missing one is fresh). ``done`` is called
    with the result: {"result": "passed" | "failed" | "skipped", "steps": K,
    "seconds": s, "message": str}.
    """

    def __init__(self, s: Session, start: int, steps: int, contexts: dict[int, dict[str, Any]] | None, back: Any,
                 done: Callable[[dict[str, Any]], None]) -> None:
        assert s.replica is not None
        self.s, self.back, self.done, self.start = s, back, done, start
        self.t0 = time.perf_counter()
        r, n = s.replica, s.config.logical_workers
        self.own = {lw: r.remove(lw) for lw in r.logical_workers()}
        if contexts is None:  # the ones held now (every logical worker: a standalone session)
            contexts = self.own
        for lw in range(n):
            r.add(lw, contexts.get(lw))
        c = r.cursors[0]
        b = r.data.micro_batch
        pos = 0 if r.sampler.batch_epoch(c, b) != c.epoch else c.pos
        left_in_epoch = (r.sampler.shard_len - pos) // b
        left_in_job = s.config.steps - start if s.config.steps else left_in_epoch
        self.k = max(0, min(steps, left_in_epoch - 1, left_in_job - 1))
        self.note = ""
        if self.k == 0:
            self.note = (f"skipped: {min(left_in_epoch, left_in_job)} step(s) left in the epoch or job at step {start}, "
                         "fewer than the check needs (2)")
        self.orders: list[list[int] | None] = [None, list(range(n // 2, n)) + list(range(n // 2))]
        self.phase, self.i = 0, 0
        self.results: list[dict[str, Any]] = []
        self.initial = _Snapshot(s)
        #: The digest the job had when the check began (a checkpoint taken during the check is of that state).
        self.digest = r.digest(0)

    def checkpoint(self, metadata: dict[str, str]) -> bytes:
        """The registered state the check began from, as a checkpoint (SIGTERM during the check): the live
        objects hold the check's steps. ``metadata`` gets "easyscale.digest" here."""
        tensors, meta = safetensors.loads(self.initial.registry)
        return safetensors.dumps(tensors, {**meta, **metadata, "easyscale.digest": self.digest})

    def begin(self) -> StepOrder | None:
        """The first step of the check, or None (and the result given) when it cannot run here."""
        if self.k == 0:
            self._finish({"result": "skipped", "steps": 0, "message": self.note})
            return None
        return self.next_step(self.s)

    # --- the driver --------------------------------------------------------------------------------------------

    def attach(self, s: Session) -> int:
        raise AssertionError("the self-check runs on an attached session")

    def next_step(self, s: Session) -> StepOrder:
        if self.i == self.k:  # the loop asks for a step after the phase's last: the phase is complete
            self.results.append(_capture(s))
            self.initial.restore(s)
            self.phase, self.i = self.phase + 1, 0
            if self.phase == len(self.orders):
                self._finish(self._compare())
                s.next_step = self.start
                return self.back.next_step(s)
        self.i += 1
        return StepOrder(self.start + self.i - 1, self.orders[self.phase], True)

    def reduce(self, s: Session, run: StepRun) -> Reduced:
        res = run.result()
        n = s.config.logical_workers
        return Reduced(reduce.scale(res.local, n), mean_loss(res.losses, n))

    def begin_commit(self, s: Session, batch: Any) -> None:
        pass

    def finalize(self, s: Session, batch: Any) -> None:
        pass

    # --- the result --------------------------------------------------------------------------------------------

    def _finish(self, result: dict[str, Any]) -> None:
        s = self.s
        assert s.replica is not None
        r = s.replica
        for lw in r.logical_workers():
            r.remove(lw)
        for lw, ctx in self.own.items():
            r.add(lw, ctx)
        r.show()
        s.driver = self.back
        result["seconds"] = time.perf_counter() - self.t0
        self.done(result)

    def _compare(self) -> dict[str, Any]:
        a, b = self.results
        n = self.s.config.logical_workers
        differ = [k for k in a if not _equal(a[k], b.get(k))]
        how = (f"{self.k} step(s) from step {self.start} run twice, logical workers 0-{n - 1} in one process and "
               f"{n // 2}-{n - 1} then 0-{n // 2 - 1}")
        # A plain attribute (or an owned generator) that training changes is kept per process, not per logical
        # worker or in a checkpoint, so it differs between placements and after a resume even where both runs
        # here end equal: a counter's increments add up to the same total in either order.
        changed = [k for k, entry in self.initial.hidden.items() if not _equal(entry[3], a.get(k))]
        if not differ and changed:
            return {"result": "failed", "steps": self.k,
                    "message": f"self-check failed: {how}: the same bits, but {changed[0]} changed during training"
                               f"{' (and ' + ', '.join(changed[1:4]) + ')' if len(changed) > 1 else ''}, "
                               f"which no placement or checkpoint keeps. Likely cause: {self._cause(changed)}"}
        if n == 1:
            return {"result": "passed", "steps": self.k, "message": f"{how}: one logical worker, no other placement"}
        if not differ:
            return {"result": "passed", "steps": self.k, "message": f"{how}: the same bits"}
        shown = ", ".join(differ[:6]) + (f" and {len(differ) - 6} more" if len(differ) > 6 else "")
        return {"result": "failed", "steps": self.k,
                "message": f"self-check failed: {how}, gave other bits: {differ[0]} differs first ({len(differ)} "
                           f"differ: {shown}). Likely cause: "
                           f"{self._cause(differ + [k for k in changed if k not in differ])}"}

    def _cause(self, differ: list[str]) -> str:
        for key in differ:
            kind = self.initial.hidden_kind(key)
            if kind is not None and kind.endswith("generator"):
                return _owned_generator(key, kind)
            owner = self.initial.hidden[key][0] if key in self.initial.hidden else None
            if kind in ("tensor", "number") and isinstance(owner, nn.Module):
                return (f"{key} is a plain {kind} attribute, not a registered buffer, and training changes it: it is "
                        "kept per process, not per logical worker; make it a buffer (self.register_buffer(...)), so "
                        "each logical worker keeps its own")
            if kind is not None:
                return (f"{key} is a plain {kind} attribute and training changes it: it is kept per process, not per "
                        "logical worker, and no checkpoint holds it; derive it from the step (batch.step), keep it "
                        "in a registered buffer, or register the object that holds it")
        created = set(_hidden(self.s)) - set(self.initial.hidden)  # attributes training set (none before the check)
        for key in differ:
            if key in created:
                return (f"{key} is an attribute that training sets and changes: it is kept per process, not per "
                        "logical worker, and no checkpoint holds it; derive it from the step (batch.step), keep it "
                        "in a registered buffer, or register the object that holds it")
        gens = self.initial.generators()
        if gens:
            kind = self.initial.hidden_kind(gens[0])
            assert kind is not None
            return _owned_generator(gens[0], kind) + (f" (also: {', '.join(gens[1:])})" if len(gens) > 1 else "")
        return ("a global: state outside the registered objects that the model, the loss or the data set changes "
                "(a module-level variable, a cache), or a draw from the global generators outside the micro-batch "
                "loop (the runtime seeds them for each micro-batch only); keep such state in a registered buffer "
                "or dict, or derive it from the step (batch.step)")


def _owned_generator(key: str, kind: str) -> str:
    what = {"generator": "a torch.Generator", "python generator": "a random.Random",
            "numpy generator": "a numpy generator"}[kind]
    return (f"{key} is {what} of its own: its draws depend on which logical workers ran before in the process; "
            "draw from the global generators instead (torch's, Python's random, numpy's np.random: the runtime "
            "seeds them per logical worker and step)")


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.to(torch.uint8) if t.dtype == torch.bool else t.view(torch.uint8)


def _equal(a: Any, b: Any) -> bool:
    """Bit for bit: -0.0 differs from 0.0, a NaN equals the same NaN."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            bool(torch.equal(_bits(a), _bits(b)))
    return bool(a == b)


def _capture(s: Session) -> dict[str, Any]:
    """Everything the check compares, by the name a refusal gives it, in the order differences are named."""
    assert s.replica is not None
    r = s.replica
    out: dict[str, Any] = {}
    tensors, meta = safetensors.loads(s.registry.encode())
    params = [n for n, _ in s.registry.parameters()]
    for name in params + sorted(set(tensors) - set(params)):
        out[name + (" (parameter)" if name in params else "")] = tensors[name]
    for lw in r.logical_workers():
        for k, t in r.bank.buffers(lw).items():
            out[f"buffer {k} of logical worker {lw}"] = t.detach().clone()
    for name, entry in json.loads(meta["easyscale.objects"]).items():
        if entry.get("kind") != "module":
            out[f"{name} (state)"] = json.dumps(entry, sort_keys=True)
    for lw in r.logical_workers():
        out[f"cursor of logical worker {lw}"] = r.cursors[lw]
    for key, (_, _, kind, value) in _hidden(s).items():
        out[key] = value
    return out


def _hidden(s: Session) -> dict[str, tuple[Any, str, str, Any]]:
    """Attributes the runtime does not keep per logical worker: key -> (owner, attribute, kind, copy of value).

    Plain tensors and numbers of the registered modules, and torch.Generators of the modules and the data set.
    """
    assert s.replica is not None
    out: dict[str, tuple[Any, str, str, Any]] = {}
    owners: list[tuple[str, Any]] = []
    for mod_name, mod in s.registry.modules().items():
        owners += [(f"{mod_name}.{n}" if n else mod_name, m) for n, m in mod.named_modules()]
    owners.append(("the data set", s.replica.data.dataset))
    # The classes of the user's own modules (not torch's): a class attribute counted up is shared by every instance.
    seen: set[type] = set()
    for prefix, owner in list(owners):
        cls = type(owner)
        if isinstance(owner, nn.Module) and cls not in seen and not cls.__module__.startswith("torch."):
            seen.add(cls)
            owners.append((f"{prefix} class {cls.__name__}", cls))
    # Registered optimizers, schedulers and the like: what their state_dict() does not hold is not checkpointed.
    saved: dict[int, set[str]] = {}
    for name, obj in s.registry.objects.items():
        if isinstance(obj, (nn.Module, dict)):
            continue
        try:
            keys = set(obj.state_dict())
        except Exception:  # the round trip at setup reports a state_dict() that raises
            continue
        owners.append((name, obj))
        saved[id(obj)] = keys
    np = sys.modules.get("numpy")
    for prefix, owner in owners:
        attrs = vars(owner)
        for attr, v in list(attrs.items()):
            if attr.startswith("_") or attr == "training" or attr in saved.get(id(owner), ()):
                continue
            if isinstance(owner, type) and (callable(v) or isinstance(v, (staticmethod, classmethod, property))):
                continue
            key = f"{prefix}.{attr}"
            if isinstance(v, torch.Generator):
                out[key] = (owner, attr, "generator", v.get_state())
            elif isinstance(v, random.Random):
                out[key] = (owner, attr, "python generator", v.getstate())
            elif np is not None and isinstance(v, (np.random.Generator, np.random.RandomState)):
                out[key] = (owner, attr, "numpy generator", _numpy_state(v))
            elif isinstance(owner, nn.Module) and isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter):
                out[key] = (owner, attr, "tensor", v.detach().clone())
            elif isinstance(v, bool):
                out[key] = (owner, attr, "flag", v)
            elif isinstance(v, (int, float, str)):
                out[key] = (owner, attr, "number" if not isinstance(v, str) else "string", v)
            elif isinstance(v, (list, tuple, dict, set)):
                out[key] = (owner, attr, "container", _container_state(v))
    return out


#: Containers up to this many elements (counted through nested ones) are compared and put back whole; larger ones,
#: or ones holding anything but numbers, strings, bools and None, by their type and length only.
_CONTAINER_LIMIT = 10_000


def _container_state(v: Any) -> Any:
    """What the check compares of a list, tuple, dict or set attribute: a copy when it holds only plain values
    (numbers, strings, bools, None, nested containers of them) and is small, else ("len", type, length), which
    still sees an append or a removal."""
    count = [0]

    def plain(x: Any) -> bool:
        count[0] += 1
        if count[0] > _CONTAINER_LIMIT:
            return False
        if x is None or isinstance(x, (bool, int, float, str)):
            return True
        if isinstance(x, (list, tuple, set)):
            return all(plain(y) for y in x)
        if isinstance(x, dict):
            return all(plain(k) and plain(y) for k, y in x.items())
        return False

    return copy.deepcopy(v) if plain(v) else ("len", type(v).__name__, len(v))


class _Snapshot:
    """The state the check starts from, to run the second placement from and to leave the job in."""

    def __init__(self, s: Session) -> None:
        assert s.replica is not None
        r = s.replica
        self.registry = s.registry.encode()
        self.bank = r.bank.snapshot()
        self.cursors = dict(r.cursors)
        self.hidden = _hidden(s)
        self.rng = torch.get_rng_state()
        self.py_rng = random.getstate()
        np = sys.modules.get("numpy")
        self.np_rng = np.random.get_state() if np is not None else None
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() \
            else None

    def restore(self, s: Session) -> None:
        assert s.replica is not None
        r = s.replica
        s.registry.decode(self.registry)
        r.bank.restore(self.bank)
        r.cursors = dict(self.cursors)
        r.clear_grads()
        for owner, attr, kind, value in self.hidden.values():
            if kind == "generator":
                getattr(owner, attr).set_state(value)
            elif kind == "python generator":
                getattr(owner, attr).setstate(value)
            elif kind == "numpy generator":
                _set_numpy_state(getattr(owner, attr), value)
            elif kind == "container":
                if not (isinstance(value, tuple) and value[:1] == ("len",)):  # a copy: put it back
                    setattr(owner, attr, copy.deepcopy(value))
            elif kind == "tensor":
                setattr(owner, attr, value.clone())
            else:
                setattr(owner, attr, value)
        torch.set_rng_state(self.rng)
        random.setstate(self.py_rng)
        np = sys.modules.get("numpy")
        if np is not None and self.np_rng is not None:
            np.random.set_state(self.np_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)

    def hidden_kind(self, key: str) -> str | None:
        entry = self.hidden.get(key)
        return entry[2] if entry is not None else None

    def generators(self) -> list[str]:
        return [k for k, (_, _, kind, _) in self.hidden.items() if kind.endswith("generator")]


def _numpy_state(g: Any) -> str:
    """A numpy Generator's or RandomState's state as JSON (its key array as a list): comparable with ==."""
    state = g.bit_generator.state if hasattr(g, "bit_generator") else g.get_state(legacy=False)
    return json.dumps(state, sort_keys=True, default=lambda a: a.tolist())


def _set_numpy_state(g: Any, text: str) -> None:
    np = sys.modules["numpy"]
    state = json.loads(text)
    inner = state.get("state")
    if isinstance(inner, dict) and isinstance(inner.get("key"), list):  # MT19937's key array
        inner["key"] = np.asarray(inner["key"], dtype=np.uint32)
    if hasattr(g, "bit_generator"):
        g.bit_generator.state = state
    else:
        g.set_state(state)
