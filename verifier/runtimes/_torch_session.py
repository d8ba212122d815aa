"""A torch kernel's session: the reference and the candidate processes, fed and read by the parent.

`TorchSession` starts the reference (`Model`, its own sandbox, only reference.py in its
folder) and learns from it the problem: `get_init_inputs()` and the shapes, dtypes and
value ranges of `get_inputs()`. It then starts the candidate (`ModelNew`, its own
sandbox, the sources and the read-only build cache entry). `init(seed)` constructs both
modules under `torch.manual_seed(seed)` (as KernelBench does) and then loads into the
candidate every entry of the reference's `state_dict` whose name, shape and dtype
match (so a `ModelNew` that declares its parameters in another order still gets the
reference's weights; one that ignores them is caught by the next seed).

`run(batch)` writes each call's inputs into both arenas at regions the parent chose
(fresh per call unless a check asks for the same region), prefills each output region
with this run's poison, calls the candidate, snapshots its regions, calls the reference
on the same inputs, and returns both sides' outputs, each held in its own width until it is
judged (`verifier.tensors.held`: a view of the bytes, widened to float64 only while it is
compared), so a quick check's kept calls cost a few copies of them, not float64 ones. The reference's
answer is computed in float64 (its module copied to float64 with the same weights, the
inputs widened exactly) and rounded to each output's dtype, so the candidate is judged
against the op's value at its dtype, not against the rounding errors of computing it in
float32 or float16 (PyTorch's tests compare low-precision ops with a higher-precision
reference too); `precision` records it, or why a module had to be run at its dtype.
A bench's timed reference calls stay at the dtype: they are the eager baseline. Nothing of the
reference's outputs is ever in the candidate's memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from verifier.errors import VerifierError
from verifier.runtimes._sizes import ScalePlan, SizesError, rewrite_constants, size_constants
from verifier.runtimes._torch import TorchBuild, TorchKernel, torch_version
from verifier.sandbox import Limits
from verifier.tensors import FLOAT_DTYPES, draw_input, encode, held, nbytes_of
from verifier.worker import (
    TORCH_WIRE_DTYPES,
    BadAnswer,
    CallAnswer,
    Escape,
    KernelRaised,
    SharedArena,
    TorchChild,
    TorchProgram,
    activity,
    escaped_work,
    overlapping_pairs,
)

__all__ = ["ALIGN", "Arg", "Call", "CallOutcome", "InputSpec", "Problem", "ReferenceError_",
           "TorchSession", "scaled_variants"]

ALIGN = 64
PAUSE_S = 0.01
MAX_INPUTS = 32
F64 = NDArray[np.float64]


class ReferenceError_(VerifierError):
    """The reference module failed or described something ktl cannot pass (not the kernel's
    fault: the folder's op itself is broken)."""


@dataclass(frozen=True)
class InputSpec:
    """One argument of `forward` as `get_inputs` returned it (a tensor, or a plain value)."""

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    stats: dict[str, Any] = field(default_factory=dict)
    value: Any = None


@dataclass(frozen=True)
class Problem:
    init: list[Any]
    inputs: tuple[InputSpec, ...]

    def tensors(self) -> list[int]:
        return [i for i, s in enumerate(self.inputs) if s.kind == "tensor"]


Arg = F64 | Any
"""An argument of one call: a tensor's float64 values (shaped), or a plain value."""


@dataclass
class Call:
    """One call the parent asks for: its arguments, their dtypes, where they go."""

    args: list[Arg]
    region: int | None = None
    """Arena region index (None: the next fresh one)."""
    at_dtype: bool = False
    """Also ask the reference module at the kernel's dtype (not only in float64): where the
    two references differ (GELU's NaN at +inf in float32), matching PyTorch's own module at
    the candidate's dtype is reported, never failed."""


@dataclass
class CallOutcome:
    """What one call gave: the candidate's answer and outputs, the reference's outputs."""

    answer: CallAnswer
    outputs: list[F64 | None]
    """Each held in its own width (`held`: a read-only view of `raw`)."""
    expected: list[F64]
    expected_dtypes: list[str]
    raw: list[bytes]
    input_changes: list[str]
    at_dtype: list[F64] | None = None
    """The reference module's own outputs at the kernel's dtype (`Call.at_dtype`), where
    asked for and where the main reference was computed in float64."""


def _parse_problem(body: dict[str, Any], dtype: str) -> Problem:
    init = body.get("init")
    inputs = body.get("inputs")
    if not isinstance(init, list) or not isinstance(inputs, list) or len(inputs) > MAX_INPUTS:
        raise ReferenceError_("get_init_inputs/get_inputs: not lists (or more than 32 inputs)")
    specs = []
    for item in inputs:
        if not isinstance(item, dict) or item.get("kind") not in ("tensor", "value"):
            raise ReferenceError_("get_inputs: an input is neither a tensor nor a plain value")
        if item["kind"] == "value":
            specs.append(InputSpec("value", value=item.get("value")))
            continue
        shape = item.get("shape")
        if not (isinstance(shape, list) and len(shape) <= 8 and all(type(d) is int and 0 <= d < 2**31
                                                                     for d in shape)):
            raise ReferenceError_("get_inputs: a tensor shape is not a list of sizes")
        native = item.get("dtype")
        if native not in TORCH_WIRE_DTYPES:
            raise ReferenceError_(f"get_inputs: a tensor of dtype {native!r}")
        cast = dtype if native in FLOAT_DTYPES else str(native)
        stats = {k: item[k] for k in ("min", "max", "mean", "std", "integral") if k in item}
        specs.append(InputSpec("tensor", tuple(shape), cast, stats))
    if not any(s.kind == "tensor" for s in specs):
        raise ReferenceError_("get_inputs returns no tensor")
    return Problem(init, tuple(specs))


def _rewrite(path: Path, sizes: ScalePlan, reference: bool) -> None:
    """The file with the plan's constants rewritten where it defines them (the solution may
    copy the problem's `batch_size = ...`; what it does not define is left alone, and a
    solution that does not parse is left for its load to fail)."""
    source = path.read_bytes()
    try:
        own = {c.name for c in size_constants(source)}
        path.write_bytes(rewrite_constants(source, {n: v for n, v in sizes.values.items()
                                                    if n in own}))
    except SizesError as exc:
        if not reference:
            return
        raise ReferenceError_(f"{path.name}: its size constants cannot be rewritten: {exc}") \
            from exc


class _Regions:
    """Where each call's inputs and outputs lie: the same offsets in both arenas."""

    def __init__(self, start: int, size: int) -> None:
        self.start, self.size = start, size
        self.next = 0

    def place(self, sizes: Sequence[int], region: int | None, call_bytes: int) -> list[int]:
        index = region if region is not None else self.next
        if region is None:
            self.next += 1
        base = self.start + (index * call_bytes) % max(self.size - call_bytes, 1)
        base -= base % ALIGN
        offsets, pos = [], base
        for n in sizes:
            offsets.append(pos)
            pos += (n + ALIGN - 1) // ALIGN * ALIGN
        if pos > self.start + self.size:
            raise VerifierError("a call's tensors do not fit the shared memory (a smaller shape?)")
        return offsets


class TorchSession:
    """Both processes of one torch kernel for one check or bench run (see the module doc)."""

    def __init__(self, kernel: TorchKernel, work: Path, build: TorchBuild, limits: Limits,  # noqa: PLR0913
                 threads: int = 1, arena_bytes: int = 256 * 2**20, gpu: bool = False,
                 poison: int = 0xFFC1, sizes: ScalePlan | None = None,
                 params_room: int | None = None) -> None:
        self.kernel, self.limits, self.threads, self.gpu = kernel, limits, threads, gpu
        self.poison = poison
        self.params_room = arena_bytes // 4 if params_room is None else params_room
        if not 0 < self.params_room < arena_bytes:
            raise VerifierError("the parameters' room must lie inside the arena")
        self.ref_mem = SharedArena(arena_bytes)
        self.cand_mem = SharedArena(arena_bytes)
        self.regions = _Regions(self.params_room, arena_bytes - self.params_room)
        self.reference: TorchChild | None = None
        self.candidate: TorchChild | None = None
        self.shapes_cache: dict[tuple[Any, ...], list[tuple[tuple[int, ...], str]]] = {}
        self.last_overlaps = 0
        self.exact = kernel.dtype != "float64"
        self.precision = ("float64, each output rounded to its dtype" if self.exact else
                          kernel.dtype)
        """How the reference's answers the candidate is judged against were computed."""
        ref_dir, cand_dir = work / "reference", work / "candidate"
        ref_dir.mkdir()
        cand_dir.mkdir()
        kernel.copy_sources(ref_dir, only=(kernel.reference,))
        kernel.copy_sources(cand_dir)
        self.sizes = sizes or ScalePlan()
        """The values of the problem's size constants both processes run at (`describe`)."""
        if self.sizes.values:
            _rewrite(ref_dir / kernel.reference, self.sizes, True)
            for rel in dict.fromkeys((kernel.reference, kernel.solution)):
                _rewrite(cand_dir / rel, self.sizes, rel == kernel.reference)
        interpret = kernel.runtime == "triton" and not gpu
        try:
            self.reference = TorchChild(
                TorchProgram("reference", ref_dir, kernel.reference, "Model", threads, gpu=gpu),
                self.ref_mem, limits)
        except BadAnswer as exc:
            raise ReferenceError_(f"the reference's process: {exc}") from exc
        # the environment is the parent's word, never a sandboxed process's answer: the
        # reference module is the claimant's code too, and could rewrite torch.__version__
        self.torch_version = (torch_version() or "unknown")[:64]
        self.problem = _parse_problem(self._ref({"cmd": "describe"}), kernel.dtype)
        self._cand_args = (cand_dir, build.ext_dir, interpret)

    def start_candidate(self) -> TorchChild:
        """Start (or restart, after a crash) the candidate's process."""
        if self.candidate is not None:
            self.candidate.close()
        folder, ext_dir, interpret = self._cand_args
        program = TorchProgram("candidate", folder, self.kernel.solution, self.kernel.entry,
                               self.threads, ext_dir, interpret, self.gpu)
        self.candidate = TorchChild(program, self.cand_mem, self.limits)
        return self.candidate

    def _ref(self, body: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
        assert self.reference is not None
        try:
            return self.reference.request(body, timeout_s)[1]
        except VerifierError as exc:
            raise ReferenceError_(f"the reference module failed: {exc}") from exc

    def close(self) -> None:
        for child in (self.candidate, self.reference):
            if child is not None:
                child.close()
        self.ref_mem.close()
        self.cand_mem.close()

    # -- initialisation ---------------------------------------------------------------------------

    def init(self, seed: int, timeout_s: float = 120.0, device: str | None = None) -> dict[str, Any]:
        """Construct both modules under `seed` (moved to `device` when given, e.g. "cuda");
        the candidate gets the reference's matching state. Returns {"loaded", "own",
        "unmatched"} as the candidate said (bounded)."""
        body = {"cmd": "init", "seed": seed, "init": self.problem.init, "dtype": self.kernel.dtype,
                **({"device": device} if device else {})}
        params = self._ref({**body, "params_at": 0, "room": self.params_room}).get("params")
        if not isinstance(params, list):
            raise ReferenceError_("the reference did not list its parameters")
        self.cand_mem.bytes[:self.params_room] = self.ref_mem.bytes[:self.params_room]
        assert self.candidate is not None
        _, got = self.candidate.request({**body, "params": params}, timeout_s)
        loaded, own, unmatched = got.get("loaded"), got.get("own"), got.get("unmatched")
        if type(loaded) is not int or type(own) is not int or not isinstance(unmatched, list):
            raise BadAnswer("the candidate's init answer is malformed")
        return {"loaded": loaded, "own": own, "reference": len(params),
                "unmatched": [str(u)[:100] for u in unmatched[:32]]}

    # -- calls ------------------------------------------------------------------------------------

    def arg_dtypes(self) -> list[str]:
        return [s.dtype for s in self.problem.inputs]

    def output_shapes(self, args: Sequence[Arg]) -> list[tuple[tuple[int, ...], str]]:
        """The reference's output shapes and dtypes for inputs shaped like `args` (probed once
        per shape set on zeros-free random values: the reference is trusted for shapes)."""
        key = tuple(a.shape if isinstance(a, np.ndarray) else repr(a) for a in args)
        if key not in self.shapes_cache:
            rng = np.random.default_rng(1)
            probe = [draw_input(s.stats, a.shape, s.dtype, rng) if isinstance(a, np.ndarray)
                     else a for a, s in zip(args, self.problem.inputs, strict=True)]
            room = self.regions.size // 2
            sizes = [self._arg_bytes(a, d) for a, d in zip(probe, self.arg_dtypes(), strict=True)]
            offsets = self.regions.place([*sizes, room], 0, sum(sizes) + room + ALIGN * 4)
            self.write(self.ref_mem, probe, offsets)
            spec = {"in": self.wire_args(probe, offsets), "out": [[offsets[-1], 0]]}
            got = self._ref({"cmd": "call", "calls": [spec]}).get("outs")
            if not isinstance(got, list) or len(got) != 1 or not isinstance(got[0], list):
                raise ReferenceError_("the reference did not answer for its outputs")
            if got[0] and isinstance(got[0][0], dict):
                raise ReferenceError_(f"the reference's output: {got[0][0].get('bad')}")
            self.shapes_cache[key] = [(tuple(o[0]), str(o[1])) for o in got[0]]
        return self.shapes_cache[key]

    def draws_randomly(self, args: Sequence[Arg], timeout_s: float = 120.0) -> bool:
        """Whether the reference module's answer to `args` depends on torch's generator: two
        calls seeded differently answer differently (dropout in training mode). Decided by
        the problem's own module on these inputs, never by what it contains (an unused
        Dropout member changes nothing)."""
        (spec,), (plan,) = self._on_reference([Call(list(args), 0)])
        answers = []
        for seed in (1, 2):
            self._ref({"cmd": "call", "calls": [{**spec, "seed": seed}]}, timeout_s)
            answers.append(self._reference_bytes(plan))
        return answers[0] != answers[1]

    def reference_alike_in_threads(self, sets: Sequence[Sequence[Arg]], pairs: int,
                                   timeout_s: float = 120.0) -> bool:
        """Whether the problem's own module (at the kernel's dtype) answers `pairs` pairs of
        calls from two threads at once (alternating the input sets) as it answers each set
        from one thread: False for a module that is not reentrant itself (KernelBench's
        VanillaRNN writes each call's hidden state into a tensor it keeps)."""
        pairs = max(1, min(pairs, self.fit(Call(list(sets[0]), 0)) // 2))  # side by side
        specs, plans = self._on_reference([Call(list(sets[k % 2]), k) for k in range(2 * pairs)])
        self._ref({"cmd": "call", "calls": specs[:2]}, timeout_s)
        alone = [self._reference_bytes(plans[0]), self._reference_bytes(plans[1])]
        self._ref({"cmd": "call", "calls": specs, "threads": 2}, timeout_s)
        return all(self._reference_bytes(p) == alone[k % 2] for k, p in enumerate(plans))

    def _on_reference(self, calls: Sequence[Call]) -> tuple[list[dict[str, Any]], list[Any]]:
        """Each call's inputs written into the reference's arena at its region: the wire specs
        and the layouts (`layout`) to read its outputs back by (`_reference_bytes`)."""
        specs, plans = [], []
        for c in calls:
            ins, outs, shapes = plan = self.layout(c)
            self.write(self.ref_mem, c.args, ins)
            specs.append({"in": self.wire_args(c.args, ins), "out": [
                [o, nbytes_of(s, d)] for o, (s, d) in zip(outs, shapes, strict=True)]})
            plans.append(plan)
        return specs, plans

    def _reference_bytes(self, plan: Any) -> list[bytes]:
        _, outs, shapes = plan
        return [self.ref_mem.bytes[o:o + nbytes_of(s, d)].tobytes()
                for o, (s, d) in zip(outs, shapes, strict=True)]

    def accepts(self, args: Sequence[Arg]) -> bool:
        """Whether the reference runs on inputs shaped like `args` (a scaled variant)."""
        try:
            self.output_shapes(args)
        except ReferenceError_:
            return False
        return True

    def _arg_bytes(self, arg: Arg, dtype: str) -> int:
        return nbytes_of(arg.shape, dtype) if isinstance(arg, np.ndarray) else 0

    def wire_args(self, args: Sequence[Arg], offsets: Sequence[int]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for a, d, off in zip(args, self.arg_dtypes(), offsets, strict=False):
            out.append({"t": [off, list(a.shape), d]} if isinstance(a, np.ndarray) else {"v": a})
        return out

    def write(self, mem: SharedArena, args: Sequence[Arg], offsets: Sequence[int]) -> None:
        for a, d, off in zip(args, self.arg_dtypes(), offsets, strict=False):
            if isinstance(a, np.ndarray):
                data = encode(a, d)
                mem.bytes[off:off + data.size] = data

    def layout(self, call: Call) -> tuple[list[int], list[int], list[tuple[tuple[int, ...], str]]]:
        outs = self.output_shapes(call.args)
        in_sizes = [self._arg_bytes(a, d) for a, d in zip(call.args, self.arg_dtypes(), strict=True)]
        out_sizes = [nbytes_of(s, d) for s, d in outs]
        total = sum((n + ALIGN - 1) // ALIGN * ALIGN for n in in_sizes + out_sizes) + ALIGN
        offsets = self.regions.place(in_sizes + out_sizes, call.region, total)
        return offsets[:len(in_sizes)], offsets[len(in_sizes):], outs

    def prefill(self, offsets: Sequence[int], outs: Sequence[tuple[tuple[int, ...], str]]) -> None:
        word = np.frombuffer(np.uint16(self.poison).tobytes(), dtype=np.uint8)
        for off, (shape, dtype) in zip(offsets, outs, strict=True):
            n = nbytes_of(shape, dtype)
            even = n - n % 2
            for mem in (self.cand_mem, self.ref_mem):
                # filled as 16-bit words in place: np.resize(word, n) concatenated n/2 arrays
                # (2 s for 4 MiB), which made a bench batch's preparation dwarf its budget
                region = mem.bytes[off:off + n]
                region[:even].view(np.uint16)[:] = self.poison
                region[even:] = word[:n - even]

    def fit(self, call: Call) -> int:
        """How many calls shaped like `call` fit the arena at once, each in its own region."""
        _, _, outs = self.layout(Call(call.args, 0))
        sizes = [self._arg_bytes(a, d) for a, d in zip(call.args, self.arg_dtypes(), strict=True)]
        total = sum((n + ALIGN - 1) // ALIGN * ALIGN for n in sizes) + sum(
            (nbytes_of(s, d) + ALIGN - 1) // ALIGN * ALIGN for s, d in outs) + ALIGN
        return max(1, (self.regions.size - total) // max(total, 1))

    def run(self, calls: Sequence[Call], timeout_s: float, threads: int = 1,
            escapes: list[Escape] | None = None) -> list[CallOutcome]:
        """Run `calls` on the candidate (one command per group of calls that fit the arena
        side by side; two threads when `threads` is 2), then on the reference; both sides'
        outputs, and the inputs the candidate changed."""
        if not calls:
            return []
        room = self.fit(calls[0])
        if threads == 2:
            room = max(2, room - room % 2)
        if len(calls) > room:
            overlaps, out = 0, []
            for k in range(0, len(calls), room):
                out += self._run(calls[k:k + room], timeout_s, threads, escapes)
                overlaps += self.last_overlaps
            self.last_overlaps = overlaps
            return out
        return self._run(calls, timeout_s, threads, escapes)

    def _run(self, calls: Sequence[Call], timeout_s: float, threads: int,
             escapes: list[Escape] | None) -> list[CallOutcome]:
        assert self.candidate is not None
        plans = [self.layout(c) for c in calls]
        specs = []
        for call, (ins, outs, shapes) in zip(calls, plans, strict=True):
            self.write(self.cand_mem, call.args, ins)
            self.prefill(outs, shapes)
            specs.append({"in": self.wire_args(call.args, ins),
                          "out": [[o, nbytes_of(s, d)] for o, (s, d) in zip(outs, shapes, strict=True)]})
        _, answers, body = self.candidate.call(specs, timeout_s, threads)
        pid = self.candidate.pid()
        before = activity(pid) if pid is not None else None
        t0 = time.perf_counter_ns()
        spans = [(o, nbytes_of(s, d)) for (_, outs, shapes) in plans
                 for o, (s, d) in zip(outs, shapes, strict=True)]
        spans += [(i, self._arg_bytes(a, d)) for c, (ins, _, _) in zip(calls, plans, strict=True)
                  for i, a, d in zip(ins, c.args, self.arg_dtypes(), strict=True)]
        snaps = [self.cand_mem.bytes[o:o + n].copy() for o, n in spans]
        if escapes is not None:
            time.sleep(PAUSE_S)
            found = self.candidate.look()
            if pid is not None and before is not None:
                found += escaped_work(pid, before, activity(pid), time.perf_counter_ns() - t0)
            if any(not np.array_equal(self.cand_mem.bytes[o:o + n], s)
                   for (o, n), s in zip(spans, snaps, strict=True)):
                found.append(Escape("outputs_changed", 0, "memory changed after the call "
                                    "returned (work deferred past the call)"))
            escapes += [f for f in found if f.key not in {e.key for e in escapes}]
        if threads == 2:
            self.last_overlaps = self._overlaps(body, len(calls))
        return [self._outcome(c, p, a) for c, p, a in zip(calls, plans, answers, strict=True)]

    def _overlaps(self, body: dict[str, Any], calls: int) -> int:
        times = body.get("times")
        half = calls // 2
        if not (isinstance(times, list) and len(times) == 2 and all(
                isinstance(t, list) and len(t) == 2 * half and all(type(v) is int for v in t)
                for t in times)):
            return 0
        assert self.candidate is not None
        words = np.asarray(times[0] + times[1], dtype=np.int64)
        return overlapping_pairs(words, half, self.candidate.last_window)

    def _outcome(self, call: Call, plan: tuple[list[int], list[int], list[tuple[tuple[int, ...], str]]],
                 answer: CallAnswer) -> CallOutcome:
        ins, outs, shapes = plan
        changes = []
        for k, (a, d, off) in enumerate(zip(call.args, self.arg_dtypes(), ins, strict=True)):
            if isinstance(a, np.ndarray):
                want = encode(a, d)
                now = self.cand_mem.bytes[off:off + want.size]
                diff = np.nonzero(now != want)[0]
                if diff.size:
                    changes.append(f"input {k} changed at {diff.size} of {want.size} bytes")
        got: list[F64 | None] = []
        raw: list[bytes] = []
        for i, (off, (shape, dtype)) in enumerate(zip(outs, shapes, strict=True)):
            n = nbytes_of(shape, dtype)
            said = answer.outputs[i] if i < len(answer.outputs) else None
            fits = said is not None and said[0] == shape and said[1] == dtype and said[2]
            region = self.cand_mem.bytes[off:off + n]
            raw.append(region.tobytes() if fits else b"")
            got.append(held(raw[-1], shape, dtype) if fits else None)  # a view of those bytes
        self.write(self.ref_mem, call.args, ins)
        spec = {"in": self.wire_args(call.args, ins),
                "out": [[o, nbytes_of(s, d)] for o, (s, d) in zip(outs, shapes, strict=True)]}
        ref = self._reference_outputs(spec, shapes)
        ok = isinstance(ref.get("outs"), list) and len(ref["outs"]) == 1
        if not ok or len(ref["outs"][0]) != len(shapes):
            raise ReferenceError_("the reference answered with a different number of outputs")
        for said, (shape, dtype) in zip(ref["outs"][0], shapes, strict=True):
            if said != [list(shape), dtype, True]:
                raise ReferenceError_(f"the reference's output {said!r:.200} is not the "
                                      f"{dtype}{list(shape)} it gave before")
        expected = self._read_ref(outs, shapes)
        at_dtype = None
        if call.at_dtype and self.exact:
            self._ref({"cmd": "call", "calls": [spec]})
            at_dtype = self._read_ref(outs, shapes)
        return CallOutcome(answer, got, expected, [d for _, d in shapes], raw, changes, at_dtype)

    def _read_ref(self, outs: Sequence[int],
                  shapes: Sequence[tuple[tuple[int, ...], str]]) -> list[F64]:
        return [held(self.ref_mem.bytes[o:o + nbytes_of(s, d)].tobytes(), s, d)
                for o, (s, d) in zip(outs, shapes, strict=True)]


    def _reference_outputs(self, spec: dict[str, Any],
                           shapes: Sequence[tuple[tuple[int, ...], str]]) -> dict[str, Any]:
        """The reference's answer for one call written to the ref arena: computed in float64
        and rounded to each output's dtype (`precision`), or, for a module whose forward
        does not run in float64, at its dtype (and `precision` says why)."""
        if self.exact:
            try:
                return self._ref({"cmd": "call", "exact": True,
                                  "calls": [{**spec, "as": [d for _, d in shapes]}]})
            except ReferenceError_ as exc:
                if not isinstance(exc.__cause__, KernelRaised):
                    raise
                self.exact = False
                self.precision = (f"{self.kernel.dtype}: its forward does not run in float64 "
                                  f"({exc})")[:400]
        return self._ref({"cmd": "call", "calls": [spec]})


def _odd(v: int) -> int:
    """An odd size near half of `v` (`v` itself where odd; 2 -> 3, 4 -> 5, 128 -> 65)."""
    if v % 2:
        return v
    return v // 2 | 1 if v >= 6 else v + 1


def scaled_variants(session: TorchSession, rng: np.random.Generator,
                    limit: int) -> list[list[tuple[int, ...]]]:
    """Up to `limit` variants of `get_inputs`' shapes that the reference accepts: first every
    size at once made odd (`_odd`: no multiple of 2, 8, 16 or 64 anywhere, the innermost
    dimension included), then, in a random order, one size replaced everywhere it occurs
    (by about half of it plus one, or by it plus three) or all of them halved plus one;
    never more than 4x the example's elements. (The odd variant comes first: a kernel right
    only at even widths passed three random variants that never touched its last size.)"""
    problem = session.problem
    base = [s.shape for s in problem.inputs]
    sizes = sorted({d for s in problem.inputs if s.kind == "tensor" for d in s.shape if d > 1},
                   reverse=True)
    elements = sum(int(np.prod(s, dtype=np.int64)) for s in base)
    tries: list[dict[int, int]] = []
    for v in sizes[:6]:
        tries += [{v: v // 2 + 1}, {v: v + 3}]
    if len(sizes) > 1:
        tries.append({v: v // 2 + 1 for v in sizes})
    order = [int(i) for i in rng.permutation(len(tries))]
    tries.append({v: _odd(v) for v in sizes})
    order.insert(0, len(tries) - 1)
    found: list[list[tuple[int, ...]]] = []
    for i in order:
        swap = tries[int(i)]
        shapes = [tuple(swap.get(d, d) for d in s) for s in base]
        if shapes == base or sum(int(np.prod(s, dtype=np.int64)) for s in shapes) > 4 * elements:
            continue
        probe = [np.zeros(sh) if spec.kind == "tensor" else spec.value
                 for sh, spec in zip(shapes, problem.inputs, strict=True)]
        if session.accepts(probe):
            found.append(shapes)
        if len(found) >= limit:
            break
    return found
