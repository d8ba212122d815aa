"""`ktl suite run PROBLEMS SOLUTIONS --out DIR` and `ktl suite merge DIR... --out DIR`.

Options become a `SuiteSettings`, one call into `client.suite` does the work, the result is
rendered: a per-problem table and a summary in KernelBench's terms (correct %, fast_p) with
ours beside them; `summary.json`, `results.json` and `results.csv` in --out. Exit codes: 0 the
run finished (whatever the kernels did); 2 bad input. Interrupted, it resumes from --out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from client.errors import InputError
from client.output import Output, run_guarded, safe
from client.suite import (
    EntryResult,
    Event,
    SuiteSettings,
    load_results,
    merge,
    run_suite,
    summarize,
    to_csv,
)

_DIR = click.Path(path_type=Path, file_okay=False)


def _shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,5})/(\d{1,5})", text)
    if not m:
        raise InputError(f"--shard {text!r}: expected K/N, e.g. 3/8")
    return int(m.group(1)), int(m.group(2))


def _write(out: Path, results: list[Any], summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out / "results.json").write_text(json.dumps([r.to_json() for r in results], indent=1))
    (out / "results.csv").write_text(to_csv(results))


def _render(console: Console, results: list[Any], summary: dict[str, Any]) -> None:
    table = Table(title="ktl suite: per problem", title_justify="left")
    for col in ("problem", "result", "speed-up", "trusted", "sizes / reason", "s"):
        table.add_column(col, overflow="fold")
    for r in results:
        speed = f"{r.speedup:.2f}x" if r.speedup is not None else ""
        trusted = "" if r.trusted is None else ("yes" if r.trusted else "no")
        why = r.reason if r.status != "correct" else r.sizes
        table.add_row(safe(r.key), safe(r.status), speed, trusted, safe(why[:160]),
                      f"{r.seconds:.0f}")
    console.print(table)
    figures = Table(title="summary (KernelBench's figures, then ours)", title_justify="left")
    for col in ("", "entries", "correct", "fast_1", "fast_1.5", "fast_2", "trusted",
                "trusted fast_1", "incorrect", "refused", "errors", "median s"):
        figures.add_column(col)
    for name, f in summary.items():
        figures.add_row(name, str(f["entries"]), f"{f['correct_pct']}%",
                        *(f"{f['fast_p'][p]}%" for p in ("1", "1.5", "2")),
                        f"{f['trusted_pct']}%", f"{f['fast_p_trusted']['1']}%",
                        str(f["incorrect"]), str(sum(f["refused"].values())), str(f["errors"]),
                        f"{f['median_seconds']:.0f}")
    console.print(figures)
    everything = summary.get("all", {})
    for kind, n in everything.get("refused", {}).items():
        console.print(safe(f"  refused ({n}): {kind}"), highlight=False)
    if everything.get("findings"):
        console.print(safe("  findings: " + ", ".join(
            f"{k} x{v}" for k, v in everything["findings"].items())), highlight=False)


@click.group("suite")
def suite_group() -> None:
    """Run a KernelBench-layout folder of problems with their solutions, resumably."""


@suite_group.command("run")
@click.argument("problems", type=_DIR)
@click.argument("solutions", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", required=True, type=_DIR,
              help="Results (and the kernel folders); an interrupted run resumes from it.")
@click.option("--level", "levels", multiple=True, type=click.IntRange(1, 99),
              help="Only this level (repeatable) [default: every level<N>/ found].")
@click.option("--budget", type=click.Choice(["quick", "full"]), default="quick", show_default=True)
@click.option("--no-bench", is_flag=True, help="Import and check only (no speed-ups).")
@click.option("--bench-runs", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--time-budget", type=click.FloatRange(1.0, 3600.0), default=10.0,
              show_default=True, help="Seconds of measuring per bench run.")
@click.option("--jobs", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Entries at once, each pinned to its own CPU (at most the CPUs usable).")
@click.option("--shard", default="1/1", show_default=True, metavar="K/N",
              help="Run the K-th of N shares (a Slurm array index, a Kubernetes job index).")
@click.option("--sample", type=click.IntRange(0, 10**6), default=0, show_default=True,
              help="Which sample of KernelBench-named solutions or JSONL generations.")
@click.option("--limit", type=click.IntRange(0, 10**6), default=0,
              help="Only the first N entries of this shard (a stated sample).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary and results as JSON.")
def run_cmd(as_json: bool, **options: Any) -> None:
    """Import, check and bench every problem of PROBLEMS (level1/, level2/, ...) with its
    solution in SOLUTIONS (same layout, KernelBench run names, or a JSONL of generations)."""
    out = Output(as_json)
    run_guarded(out, lambda: _show(out, options["out_dir"], _run(out, _settings(options))))


def _settings(o: dict[str, Any]) -> SuiteSettings:
    """`ktl suite run`'s options as the suite's settings."""
    return SuiteSettings(o["problems"], o["solutions"], o["out_dir"], tuple(o["levels"]),
                         o["budget"], not o["no_bench"], o["bench_runs"], o["time_budget"],
                         o["jobs"], _shard(o["shard"]), o["sample"], limit=o["limit"])


def _run(out: Output, settings: SuiteSettings) -> list[EntryResult]:
    """The suite run, its progress on a bar (a line per entry where stderr is no terminal)."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=out.err, disable=not out.err.is_terminal)
    task = bar.add_task("ktl suite", total=None)

    def on_event(event: Event) -> None:
        now = ", ".join(event.current) or "…"
        bar.update(task, total=event.total, completed=event.done,
                   description=safe(f"ktl suite: {now}"[:80]).plain)
        if event.last is not None and not out.err.is_terminal:
            out.note(f"[{event.done}/{event.total}] {event.last.key}: {event.last.status} "
                     f"({event.last.seconds:.0f} s)", "dim")

    with bar:
        return run_suite(settings, on_event)


def _show(out: Output, out_dir: Path, results: list[EntryResult]) -> int:
    """Write summary.json, results.json and results.csv to `out_dir`; print them."""
    summary = summarize(results)
    _write(out_dir, results, summary)
    out.result({"summary": summary, "results": [r.to_json() for r in results]},
               lambda c: _render(c, results, summary))
    return 0


@suite_group.command("merge")
@click.argument("shards", nargs=-1, required=True, type=_DIR)
@click.option("--out", "out_dir", required=True, type=_DIR,
              help="Where the joined summary.json, results.json and results.csv go.")
@click.option("--json", "as_json", is_flag=True)
def merge_cmd(shards: tuple[Path, ...], out_dir: Path, as_json: bool) -> None:
    """Join the results of shards (each a `ktl suite run --shard K/N --out DIR`) into one."""
    out = Output(as_json)
    run_guarded(out, lambda: _show(out, out_dir, merge([load_results(s) for s in shards])))


def register(group: click.Group) -> None:
    """Add `suite run` and `suite merge` to the `ktl` group."""
    group.add_command(suite_group)
