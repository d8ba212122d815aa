"""`ktl check` (the verification suite) and `ktl bench` (the benchmark) on a kernel folder.

Exit codes: 0 all checks pass / the measurement can be trusted; 1 a check failed /
the measurement cannot be trusted (the reasons are printed); 2 bad input.
`--json` prints the verification/v1 or benchmark/v1 predicate body.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from client.errors import EXIT_VERIFICATION, InputError
from client.output import Output, run_guarded, safe
from verifier import (
    DEFAULT_RUNS,
    BenchSettings,
    CheckReport,
    RunSet,
    VerifierError,
    bench_runs,
    check,
)

_SHAPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[0-9]{1,7}(,[A-Za-z_][A-Za-z0-9_]*=[0-9]{1,7}){0,7}")
_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow", "error": "bold magenta",
          "warn": "bold yellow", "inconclusive": "cyan"}


def parse_shape(text: str) -> dict[str, int]:
    """`M=256,N=256,K=256` -> {"M": 256, "N": 256, "K": 256}; InputError if malformed."""
    if not _SHAPE.fullmatch(text):
        raise InputError(f"--shape {text!r}: expected NAME=INT,NAME=INT,... e.g. M=256,N=256,K=256")
    out: dict[str, int] = {}
    for part in text.split(","):
        name, value = part.split("=")
        if name in out:
            raise InputError(f"--shape {text!r}: {name} given twice")
        out[name] = int(value)
    return out


def _check_table(body: dict[str, Any], title: Text) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("check", style="bold")
    table.add_column("outcome")
    table.add_column("evidence", overflow="fold")
    for c in body["checks"]:
        style = _STYLE.get(c["outcome"], "")
        table.add_row(safe(c["name"]), safe(c["outcome"], style),
                      safe(c["detail"] + _proof_note(c.get("proof"))))
    return table


def _proof_note(proof: Any) -> str:
    """A proof row's tool, binary digest, bounds and self-test, as the statement records them."""
    if not isinstance(proof, dict):
        return ""
    bounds = ", ".join(f"{k}<={v}" for k, v in dict(proof.get("bounds") or {}).items())
    digest = str(proof.get("tool_sha256") or "")[:16]
    seen = proof.get("counterexample")
    where = (f"; counterexample {dict(seen)} at {proof.get('location')}" if seen else "")
    return (f" [{proof.get('tool')} {proof.get('tool_version')}"
            + (f" sha256 {digest}…" if digest else "")
            + f"; bounds {bounds}; {proof.get('result')}; self-test {proof.get('self_test')}"
            + f"{where}; {proof.get('cpu_s', 0):.1f} s CPU]")


@click.command("check")
@click.argument("kernel_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the verification/v1 body.")
@click.option("--seed", type=click.IntRange(0, 2**53 - 1), default=None,
              help="Seed of the random inputs (default: fresh; always recorded).")
@click.option("--budget", type=click.Choice(["quick", "full"]), default="quick", show_default=True,
              help="quick: a few shapes; full: every edge shape, more repeats and sanitizer "
                   "shapes, and the proofs (proof.memory, proof.overflow; docs/proofs.md).")
def check_cmd(kernel_dir: Path, as_json: bool, seed: int | None, budget: str) -> None:
    """Run the verification suite on KERNEL_DIR in a sandbox; exit 1 if any check fails."""
    out = Output(as_json)
    run_guarded(out, lambda: _show_check(out, budget, _checked(out, kernel_dir, budget, seed)))


def _checked(out: Output, kernel_dir: Path, budget: str, seed: int | None) -> CheckReport:
    try:
        return check(kernel_dir, budget=budget, seed=seed,
                     progress=lambda msg: out.note(f"{msg}…", "dim"))
    except VerifierError as exc:
        raise InputError(f"{kernel_dir}: {exc}") from exc


def _show_check(out: Output, budget: str, report: CheckReport) -> int:
    pred = report.to_predicate()

    def render(console: Console) -> None:
        console.print(_check_table(pred.to_json(), safe(f"ktl check {report.kernel} ({report.op}, "
                                                        f"budget {budget}, seed {report.seed})")))
        verdict = "[bold green]PASS[/]" if report.passed else "[bold red]FAIL[/]"
        console.print(f"verdict: {verdict}")

    out.result(pred.to_json(), render)
    if not report.passed:
        names = ", ".join(c.name for c in report.failures)
        out.note(f"check failed: {names}", "bold red")
        return EXIT_VERIFICATION
    return 0


def _bench_default(name: str) -> Any:
    """The verifier's own default for a `ktl bench` option."""
    return next(f.default for f in dataclasses.fields(BenchSettings) if f.name == name)


_DEVICES: dict[str, Literal["auto", "cuda", "cpu"]] = {"auto": "auto", "cuda": "cuda", "cpu": "cpu"}
"""`--device`'s names, as BenchSettings types them."""


class _VerifierDefault(click.Option):
    """An option whose default is the verifier's, looked up when parsing or showing help."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return super().get_default(ctx, call=True)


@click.command("bench")
@click.argument("kernel_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the benchmark/v1 body.")
@click.option("--shape", "shapes", multiple=True, metavar="D=N,...",
              help="A shape such as M=256,N=256,K=256 (repeatable; default: the op's bench shapes).")
@click.option("--seed", type=click.IntRange(0, 2**53 - 1), default=None, help="Seed of the inputs.")
@click.option("--time-budget", type=click.FloatRange(1.0, 3600.0),
              default=lambda: _bench_default("time_budget_s"), show_default=True,
              cls=_VerifierDefault,
              help="Seconds of measuring per run, split across the shapes.")
@click.option("--runs", type=click.IntRange(1, 64), default=None,
              help="Independent runs (fresh processes) whose spread is part of the claim "
                   "[default: 5].")
@click.option("--until-agree", type=click.IntRange(1, 64), default=None, metavar="N",
              help="While the runs disagree (their interval wider than +-10 %), --runs more "
                   "at a time, up to N in all (`ktl publish` measures this way, up to 15).")
@click.option("--no-pin", is_flag=True,
              help="Do not pin single-threaded runs to one CPU.")
@click.option("--threads", type=click.IntRange(1, 1024),
              default=lambda: _bench_default("threads"), show_default=True,
              cls=_VerifierDefault,
              help="Threads for the kernel (OpenMP) and the baseline (BLAS).")
@click.option("--torch-compile", "torch_compile", is_flag=True,
              help="For op 'torch': also time the reference under torch.compile (a second "
                   "baseline, reported in the notes; compiling takes a while).")
@click.option("--samples-out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the raw samples (the blob whose sha256 is in the body) to FILE.")
@click.option("--device", type=click.Choice(list(_DEVICES)),
              default=lambda: _bench_default("device"), show_default=True, cls=_VerifierDefault,
              help="auto: on the GPU where one is usable, else on the host; cuda: on the GPU "
                   "(refused without one); cpu: a torch/triton kernel on the device path on "
                   "torch's CPU build.")
@click.option("--cold", is_flag=True,
              help="On the device path: flush the L2 between calls (cold caches; the "
                   "statement records the mode).")
def bench_cmd(as_json: bool, **options: Any) -> None:
    """Benchmark KERNEL_DIR against its baseline (NumPy float32; for op 'torch' the
    reference module in PyTorch eager) in independent runs; exit 1 if it cannot be trusted."""
    out = Output(as_json)
    opts = BenchOptions(**options)
    run_guarded(out, lambda: _show_bench(out, opts.measure(
        lambda msg: out.note(f"{msg}…", "dim"))))


@dataclass(frozen=True)
class BenchOptions:
    """`ktl bench`: the kernel folder, the shapes (default: the op's), the inputs' seed,
    seconds of measuring per run, independent runs (and the most while they disagree),
    pinning, threads, a second torch.compile baseline, where the raw samples go, the device
    and cold caches."""

    # no defaults here: the command's options carry them (the bench's own from BenchSettings)
    kernel_dir: Path
    shapes: tuple[str, ...]
    seed: int | None
    time_budget: float
    runs: int | None
    until_agree: int | None
    no_pin: bool
    threads: int
    torch_compile: bool
    samples_out: Path | None
    device: str
    cold: bool

    def measure(self, progress: Callable[[str], None]) -> RunSet:
        """The independent runs (their raw samples written to `samples_out` if given)."""
        parsed = [parse_shape(s) for s in self.shapes] or None
        try:
            settings = BenchSettings(shapes=parsed, seed=self.seed,
                                     time_budget_s=self.time_budget, threads=self.threads,
                                     compile_baseline=self.torch_compile,
                                     device=_DEVICES[self.device], cold=self.cold,
                                     until_agree=self.until_agree or 0)
            report = bench_runs(self.kernel_dir, self.runs or DEFAULT_RUNS, settings,
                                pin=not self.no_pin, progress=progress)
        except VerifierError as exc:
            raise InputError(f"{self.kernel_dir}: {exc}") from exc
        if self.samples_out is not None:
            self.samples_out.write_bytes(report.samples_blob())
        return report


def _show_bench(out: Output, report: RunSet) -> int:
    pred = report.to_predicate()
    first = report.runs[0]

    def render(console: Console) -> None:
        table = Table(title=safe(f"ktl bench {first.kernel} ({first.op}, seed {first.seed}, "
                                 f"{len(report.runs)} runs)"), title_justify="left")
        for col in ("shape", "n", "kernel median", "p5..p95", "baseline median", "speed-up",
                    "95% CI over runs", "runs", "GFLOP/s"):
            table.add_column(col)
        for r in pred.results:
            shape = ",".join(f"{k}={v}" for k, v in r.shape.items())
            table.add_row(safe(shape), str(r.n), f"{r.median_ns / 1e3:.1f} µs",
                          f"{r.p5_ns / 1e3:.1f}..{r.p95_ns / 1e3:.1f} µs",
                          f"{r.baseline_median_ns / 1e3:.1f} µs", f"{r.speedup:.3f}x",
                          f"[{r.speedup_ci95[0]:.3f}, {r.speedup_ci95[1]:.3f}]",
                          " ".join(f"{x.speedup:.3f}" for x in r.runs or ()),
                          "—" if r.gflops is None else f"{r.gflops:.2f}")
        console.print(table)
        for note in pred.notes:
            console.print(safe(f"  • {note}"), highlight=False)
        trusted = "[bold green]yes[/]" if report.trusted else "[bold red]NO[/]"
        console.print(f"trusted: {trusted}")

    out.result(pred.to_json(), render)
    if not report.trusted:
        out.note("the measurement cannot be trusted: see the notes above", "bold red")
        return EXIT_VERIFICATION
    return 0


def register(group: click.Group) -> None:
    """Add `check` and `bench` to the `ktl` group."""
    group.add_command(check_cmd)
    group.add_command(bench_cmd)
