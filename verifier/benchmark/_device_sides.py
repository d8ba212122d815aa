"""A torch kernel's two processes as `DeviceSide`s: staged, run and fetched by the parent.

`TorchSide` drives one `TorchChild` (candidate or reference) through the device commands
of `verifier.worker._torch_child` (`stage`, `run`, `fetch`). Inputs go through the
shared arena into buffers the child allocated once per shape on its device; each call
keeps its own outputs there until the parent fetches the ones it picked. Everything a
candidate answers is parsed strictly (`BadAnswer`); its in-process event times are kept
only as numbers for `verifier.device` to check against the parent's clock. Between
batches (when it stages the next one, outside the timed region) the candidate's side
looks for threads or processes still at work and answers that came unasked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from verifier.device import BatchAnswer, Fetched, Inputs
from verifier.runtimes import Call, TorchSession
from verifier.tensors import compare_tensor, decode, nbytes_of
from verifier.worker import (
    BadAnswer,
    Escape,
    SharedArena,
    TorchChild,
    activity,
    escaped_work,
    parse_call_answers,
)

__all__ = ["Drawn", "Seeded", "TorchSide", "outputs_agree"]

F64 = NDArray[np.float64]
CALL_TIMEOUT_S = 120.0


class Drawn(NamedTuple):
    """One call's inputs as `FreshInputs.take` drew them: shape carriers and plain values
    (`args`), and each tensor's own bytes in its dtype (`data`, None for a plain value):
    staging copies the bytes, never encodes them again."""

    args: list[Any]
    data: list[Any]


class Seeded(NamedTuple):
    """One call whose floating inputs each process draws on the device from `seed` (the
    same for every call of a batch, drawn by the parent for it; the calls follow one
    another in the stream): `specs` per argument, [shape, dtype, dist, a, b] or None for an
    argument staged as `data` (its bytes, None for a plain value)."""

    args: list[Any]
    specs: list[Any]
    data: list[Any]
    seed: int


def outputs_agree(dtypes: Sequence[str]) -> Callable[[Sequence[F64], Sequence[F64]], bool]:
    """The comparison of one call's candidate outputs with the baseline's, per dtype."""
    def agree(mine: Sequence[F64], theirs: Sequence[F64]) -> bool:
        if len(mine) != len(theirs) or len(mine) != len(dtypes):
            return False
        return all(a.shape == b.shape and compare_tensor(a, b, d).ok
                   for a, b, d in zip(mine, theirs, dtypes, strict=True))
    return agree


class TorchSide:
    """One torch process on a device (see the module docstring)."""

    def __init__(self, session: TorchSession, child: TorchChild, mem: SharedArena, device: str,
                 flush_bytes: int, watch: bool) -> None:
        self.session, self.child, self.mem, self.device = session, child, mem, device
        self.flush_bytes, self.watch = flush_bytes, watch
        self.outs: list[tuple[list[int], list[tuple[tuple[int, ...], str]]]] = []
        self.escapes: list[Escape] = []
        self.allocated = 0

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.child.request(body, CALL_TIMEOUT_S)[1]

    def stage(self, calls: Sequence[Inputs]) -> float:
        """Write each call's inputs into the arena (a `Drawn` call's bytes as drawn, host
        arrays encoded), then one command copies them into the device buffers; answers the
        parent's clock across that command alone (the escape watch before it is ours)."""
        if self.watch:
            self._look()
        wire, self.outs = [], []
        body: dict[str, Any] = {"cmd": "stage", "device": self.device}
        for j, call in enumerate(calls):
            args = list(call.args) if isinstance(call, Drawn | Seeded) else list(call)
            ins, outs, shapes = self.session.layout(Call(args, j))
            if isinstance(call, Drawn | Seeded):
                for off, raw in zip(ins, call.data, strict=True):
                    if raw is not None:
                        self.mem.bytes[off:off + raw.size] = raw
            else:
                self.session.write(self.mem, args, ins)
            args_wire = self.session.wire_args(args, ins)
            if isinstance(call, Seeded):
                body["seed"] = call.seed
                args_wire = [w if spec is None else {"g": spec}
                             for w, spec in zip(args_wire, call.specs, strict=True)]
            wire.append({"in": args_wire})
            self.outs.append((outs, shapes))
        ns, got = self.child.request({**body, "calls": wire}, CALL_TIMEOUT_S)
        fresh = got.get("allocated")
        if type(fresh) is not int or not 0 <= fresh <= 64 * len(calls):
            raise BadAnswer("a stage answer must count the buffers it allocated")
        self.allocated += fresh
        return float(ns)

    def run(self, count: int, cold: bool, empty: bool = False) -> BatchAnswer:
        got = self._request({"cmd": "run", "count": count, "cold": cold, "empty": empty,
                             "events": not empty, "flush_bytes": self.flush_bytes})
        if self.watch and not empty:
            # threads a batch started and left running at its answer (read from /proc at
            # once, by the parent): deferred work, whatever the fetch found
            self.child.judge_starts()
        gap = got.get("stream_gap_ns")
        if gap is not None and not _time(gap):
            raise BadAnswer("a run's stream gap must be a finite time")
        gap_ns = None if gap is None else float(gap)
        events = got.get("events")
        if events is None:
            return BatchAnswer(None, gap_ns)
        if not (isinstance(events, list) and len(events) == count and all(
                _time(e) for e in events)):
            raise BadAnswer("a run's events must be one finite time per call")
        return BatchAnswer(tuple(float(e) for e in events), gap_ns)

    def fetch(self, calls: Sequence[int]) -> Fetched:
        regions = []
        for c in calls:
            offsets, shapes = self.outs[c]
            for off, (shape, dtype) in zip(offsets, shapes, strict=True):
                self.mem.bytes[off:off + nbytes_of(shape, dtype)] = 0xFF  # NaN until written
            regions.append([[o, nbytes_of(s, d)] for o, (s, d) in zip(offsets, shapes, strict=True)])
        body = self._request({"cmd": "fetch", "calls": list(calls), "out": regions})
        answers = parse_call_answers(body, len(calls))
        got: list[list[F64]] = []
        for c, answer in zip(calls, answers, strict=True):
            offsets, shapes = self.outs[c]
            if answer.bad or [(s, d, True) for s, d in shapes] != list(answer.outputs):
                got.append([])
                continue
            got.append([decode(self.mem.bytes[o:o + nbytes_of(s, d)].copy(), s, d)
                        for o, (s, d) in zip(offsets, shapes, strict=True)])
        return Fetched(got, float(self.child.last_waited_ns), float(self.child.last_cpu_ns))

    def _look(self) -> None:
        """Threads or processes still at work since the last batch, unasked answers."""
        found = self.child.look()
        pid = self.child.pid()
        if pid is not None:
            before = activity(pid)
            t0 = time.perf_counter_ns()
            time.sleep(0.002)
            found += escaped_work(pid, before, activity(pid), time.perf_counter_ns() - t0)
        known = {e.key for e in self.escapes}
        self.escapes += [f for f in found if f.key not in known]


def _time(value: Any) -> bool:
    """A finite, non-negative number of ns (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value) and value >= 0
