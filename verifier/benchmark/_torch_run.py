"""What the torch strategies (`_torch_bench` on the host, `_device_bench` on a device) share:
one run of a torch module's inputs (`TorchRun`), what a timing that ran gives the report
(`TorchMeasured`), the inputs drawn like the reference's `get_inputs`
(`fresh_inputs`), the shape as benchmark/v1 records it and the report (`torch_report`).
Imports `_report` and `_torch_pool` of the folder, nothing above.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import BenchmarkResult, Environment
from verifier.benchmark._report import BenchReport, Findings
from verifier.benchmark._torch_pool import FreshInputs, TensorDraw
from verifier.progress import Progress
from verifier.runtimes import TorchKernel, TorchSession
from verifier.tensors import TOLERANCES

__all__ = ["TORCH_BASELINE", "TorchMeasured", "TorchRun", "fresh_inputs", "input_names",
           "shape_record", "torch_report"]

TORCH_BASELINE = "torch-eager"


@dataclass(frozen=True)
class TorchRun:
    """One bench run of a torch module's fixed inputs (this path's and the device path's):
    the kernel, the seed and its generator, the environment, the notes the run collects
    and where progress goes."""

    kernel: TorchKernel
    seed: int
    rng: np.random.Generator
    env: dict[str, Any]
    notes: Findings
    progress: Progress


@dataclass(frozen=True)
class TorchMeasured:
    """What a timing that ran gives the report: its results and how they were taken."""

    results: tuple[BenchmarkResult, ...]
    baselines: Sequence[str]
    trusted: bool
    samples: tuple[dict[str, Any], ...]
    seconds: float


def shape_record(session: TorchSession) -> dict[str, int]:
    """The measured shape as benchmark/v1 records it: each tensor input's sizes named after
    the reference's `forward` argument and the axis (`A_0`, `A_1`, `B_0`, ...; issue 42:
    not `a0_0`), by position (`a0_0`) where the argument has no usable name; at most 8."""
    kernel = session.kernel
    names = input_names(_read_source(kernel.directory / kernel.reference),
                        len(session.problem.inputs))
    out: dict[str, int] = {}
    for i, s in enumerate(session.problem.inputs):
        for j, d in enumerate(s.shape):
            if len(out) < 8:
                out[f"{names[i]}_{j}"] = int(d)
    return out or {"a0": 1}


def fresh_inputs(session: TorchSession, rng: np.random.Generator) -> FreshInputs:
    """The stream of the run's timed inputs, drawn like `get_inputs`' (`_torch_pool`): no
    input set ever repeats, drawn in bulk ahead; both torch strategies take their calls
    from it."""
    return FreshInputs([TensorDraw(s.shape, s.dtype, s.stats) if s.kind == "tensor" else
                        TensorDraw(None, s.dtype, {}, s.value) for s in session.problem.inputs],
                       rng)


MAX_SOURCE = 1 << 20
"""The most of a reference file read for its argument names."""
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,12}")
"""An argument name a shape key takes whole (`_IDENT` of attest, with room for `_7`)."""


def _read_source(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(MAX_SOURCE + 1)
    except OSError:
        return b""


def input_names(source: bytes, count: int) -> list[str]:
    """The `count` inputs' names: the parameters of `Model.forward` in the reference source
    (after `self`, in order) where each is a plain name of at most 13 characters and all are
    distinct; otherwise positional names (`a0`, `a1`, ...) for all of them. Pure: the source
    is parsed, never run."""
    fallback = [f"a{i}" for i in range(count)]
    if len(source) > MAX_SOURCE:
        return fallback
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return fallback
    forward = next((f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Model"
                    for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward"),
                   None)
    if forward is None:
        return fallback
    params = [a.arg for a in (*forward.args.posonlyargs, *forward.args.args)][1:]
    if len(params) < count or any(not _NAME.fullmatch(n) for n in params[:count]) \
            or len(set(params[:count])) != count:
        return fallback
    return params[:count]



def torch_report(run: TorchRun, session: TorchSession | None, init_seed: int | None,
            measured: TorchMeasured | None = None) -> BenchReport:
    """The bench report: `measured` None when the run failed before any timing."""
    kernel, notes = run.kernel, run.notes
    m = measured or TorchMeasured((), (TORCH_BASELINE,), False, (), 0.0)
    results = m.results
    shapes = tuple(dict(r.shape) for r in results) or ({"a0": 1},)
    tol = TOLERANCES[kernel.dtype]
    torch = {"reference_sha256": kernel.reference_digest,
             "torch_version": (session.torch_version if session else "unknown")[:64],
             "dtype": kernel.dtype, "rtol": tol.rtol, "atol": tol.atol,
             "init_seeds": [] if init_seed is None else [init_seed],
             "baselines": list(m.baselines)}
    return BenchReport(kernel.name, "torch", run.seed, Environment.from_json(run.env), shapes, 0,
                       results, m.trusted and bool(results) and not notes.faults,
                       tuple(notes.notes), m.samples, m.seconds, tuple(notes.faults), torch=torch,
                       caveats=tuple(notes.caveats))
