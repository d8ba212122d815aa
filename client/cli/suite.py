"""`ktl suite run PROBLEMS SOLUTIONS --out DIR [--publish]`, `ktl suite merge DIR... --out DIR`,
`ktl suite publish DIR --problems PROBLEMS` and `ktl suite verify --index N`.

Options become a `SuiteSettings`, one call into `client.suite` does the work, the result is
rendered: a per-problem table and a summary in KernelBench's terms (correct %, fast_p) with
ours beside them; `summary.json`, `results.json`, `results.csv` and `run.json` (how it was
run) in --out. Exit codes: 0 the run finished (whatever the kernels did) or the suite
statement verified; 1 it did not verify; 2 bad input; 3 the log could not be reached.
Interrupted, a run resumes from --out, and so does a publish (what was logged comes back as
duplicates).
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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

from attest import AttestError
from attest.predicates import SuiteRunSettings
from client.cli.log import log_key_option, log_option
from client.errors import InputError, VerificationFailed
from client.output import Output, run_guarded, safe
from client.session import connect, require_url
from client.state import TrustedState
from client.suite import (
    EntryResult,
    Event,
    PublishSettings,
    SuiteSettings,
    apply_bound,
    dataset_manifest,
    load_results,
    merge,
    parse_size,
    publish_suite,
    run_suite,
    summarize,
    to_csv,
    verify_suite,
)
from client.witnesses import load_witness_policy, witness_policy_option

_DIR = click.Path(path_type=Path, file_okay=False)
F = TypeVar("F", bound=Callable[..., Any])


def _shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,5})/(\d{1,5})", text)
    if not m:
        raise InputError(f"--shard {text!r}: expected K/N, e.g. 3/8")
    return int(m.group(1)), int(m.group(2))


RUN_FILE = "run.json"


def _write(out: Path, results: list[Any], summary: dict[str, Any],
           run: dict[str, Any] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if run is not None:
        (out / RUN_FILE).write_text(json.dumps(run, indent=1, sort_keys=True))
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out / "results.json").write_text(json.dumps([r.to_json() for r in results], indent=1))
    (out / "results.csv").write_text(to_csv(results))


def _render(console: Console, results: list[Any], summary: dict[str, Any],
            published: dict[str, Any] | None = None, bound: int | None = None) -> None:
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
                "trusted fast_1", "incorrect", "refused", "errors", "median s (check + bench)"):
        figures.add_column(col)
    for name, f in summary.items():
        figures.add_row(name, str(f["entries"]), f"{f['correct_pct']}%",
                        *(f"{f['fast_p'][p]}%" for p in ("1", "1.5", "2")),
                        f"{f['trusted_pct']}%", f"{f['fast_p_trusted']['1']}%",
                        str(f["incorrect"]), str(sum(f["refused"].values())), str(f["errors"]),
                        _medians(f))
    console.print(figures)
    everything = summary.get("all", {})
    for kind, n in everything.get("refused", {}).items():
        console.print(safe(f"  refused ({n}): {kind}"), highlight=False)
    if everything.get("findings"):
        console.print(safe("  findings: " + ", ".join(
            f"{k} x{v}" for k, v in everything["findings"].items())), highlight=False)
    if bound is not None:
        console.print(f"  ktl's own memory was bound to {bound:,} bytes (--memory-limit)",
                      highlight=False)
    if published is not None:
        _render_published(console, published)


def _publish_options(fn: F) -> F:
    """The options of publishing a suite (`suite publish`, `suite run --publish`)."""
    for option in reversed((
        click.option("--key", "key_path", type=click.Path(path_type=Path, dir_okay=False),
                     default=None, help="Your private signing key (from `ktl keygen`)."),
        click.option("--passphrase-env", metavar="VAR",
                     help="Environment variable holding the key's passphrase."),
        click.option("--name", "suite_name", default="kernelbench/suite", show_default=True,
                     metavar="VENDOR/SUITE", help="The suite statement's subject name."),
        click.option("--allow-weak", is_flag=True,
                     help="Publish weak benchmarks too (without it they are left out)."),
        log_option, log_key_option, witness_policy_option)):
        fn = option(fn)
    return fn


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
@click.option("--memory-limit", default="auto", show_default=True, metavar="SIZE",
              help="The bound on ktl's own memory (RLIMIT_DATA of this process and every "
                   "step it starts), e.g. 8G; auto: 3/4 of this machine's memory.")
@click.option("--publish", is_flag=True,
              help="Then log the run as one claim (see `ktl suite publish`; needs --key).")
@_publish_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary and results as JSON.")
def run_cmd(as_json: bool, **options: Any) -> None:
    """Import, check and bench every problem of PROBLEMS (level1/, level2/, ...) with its
    solution in SOLUTIONS (same layout, KernelBench run names, or a JSONL of generations)."""
    out = Output(as_json)
    run_guarded(out, lambda: _run_and_show(out, options))


def _settings(o: dict[str, Any]) -> SuiteSettings:
    """`ktl suite run`'s options as the suite's settings."""
    return SuiteSettings(o["problems"], o["solutions"], o["out_dir"], tuple(o["levels"]),
                         o["budget"], not o["no_bench"], o["bench_runs"], o["time_budget"],
                         o["jobs"], _shard(o["shard"]), o["sample"], limit=o["limit"])


def _run_and_show(out: Output, o: dict[str, Any]) -> int:
    """Bound ktl's own memory, run the suite, write its files, publish it if asked, print."""
    if o["publish"] and o["key_path"] is None:
        raise InputError("--publish needs --key (the signing key)")
    bound = apply_bound(parse_size(o["memory_limit"]))
    out.note(f"ktl's own memory is bound to {bound:,} bytes (--memory-limit)", "dim")
    settings = _settings(o)
    results = _run_with_progress(out, settings)
    summary = summarize(results)
    run = {"budget": settings.budget, "bench": settings.bench,
           "shard": f"{settings.shard[0]}/{settings.shard[1]}",
           "memory_limit_bytes": bound, "problems": str(settings.problems)}
    _write(o["out_dir"], results, summary, run)
    report: dict[str, Any] = {"summary": summary, "memory_limit_bytes": bound,
                              "results": [r.to_json() for r in results]}
    if o["publish"]:
        report["published"] = _publish(out, o["out_dir"], settings.problems, o)
    out.result(report, lambda c: _render(c, results, summary, report.get("published"), bound))
    return 0


def _run_with_progress(out: Output, settings: SuiteSettings) -> list[EntryResult]:
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=out.err, disable=not out.err.is_terminal)

    def on_event(event: Event) -> None:
        now = ", ".join(event.current) or "…"
        bar.update(task, total=event.total, completed=event.done,
                   description=safe(f"ktl suite: {now}"[:80]).plain)
        if event.last is not None and not out.err.is_terminal:
            out.note(f"[{event.done}/{event.total}] {event.last.key}: {event.last.status} "
                     f"({event.last.seconds:.0f} s)", "dim")

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (a batch system's preemption) stops as Ctrl-C does

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        with bar:
            task = bar.add_task("ktl suite", total=None)
            return run_suite(settings, on_event)
    finally:
        signal.signal(signal.SIGTERM, before)


def _publish(out: Output, out_dir: Path, problems: Path, o: dict[str, Any]) -> dict[str, Any]:
    """Log a finished run (its results and run.json in `out_dir`) as one claim."""
    results = load_results(out_dir)
    run_file = out_dir / RUN_FILE
    try:
        run = json.loads(run_file.read_text()) if run_file.is_file() else {}
    except ValueError as exc:
        raise InputError(f"{run_file}: {exc}") from None
    levels = tuple(sorted({r.level for r in results}))
    try:
        run_settings = SuiteRunSettings(
            budget=run.get("budget", "quick"), bench=bool(run.get("bench", True)),
            levels=levels or (1,), shard=str(run.get("shard", "1/1")),
            memory_limit_bytes=run.get("memory_limit_bytes"))
    except AttestError as exc:
        raise InputError(f"{run_file}: {exc}") from None
    settings = PublishSettings(
        out_dir, problems, o["key_path"], o["log_url"], o["log_key"], o["suite_name"],
        o["allow_weak"], o["passphrase_env"], o["witness_policy_path"])
    return publish_suite(settings, results, run_settings, out)


@suite_group.command("merge")
@click.argument("shards", nargs=-1, required=True, type=_DIR)
@click.option("--out", "out_dir", required=True, type=_DIR,
              help="Where the joined summary.json, results.json and results.csv go.")
@click.option("--json", "as_json", is_flag=True)
def merge_cmd(shards: tuple[Path, ...], out_dir: Path, as_json: bool) -> None:
    """Join the results of shards (each a `ktl suite run --shard K/N --out DIR`) into one."""
    out = Output(as_json)
    run_guarded(out, lambda: _merge_and_show(out, shards, out_dir))


def _merge_and_show(out: Output, shards: tuple[Path, ...], out_dir: Path) -> int:
    """Join the shards' results (and how they were run) into `out_dir`; print the summary."""
    results = merge([load_results(s) for s in shards])
    summary = summarize(results)
    runs = [json.loads((s / RUN_FILE).read_text()) for s in shards if (s / RUN_FILE).is_file()]
    _write(out_dir, results, summary, {**runs[0], "shard": "1/1"} if runs else None)
    out.result({"summary": summary, "results": [r.to_json() for r in results]},
               lambda c: _render(c, results, summary))
    return 0


@suite_group.command("publish")
@click.argument("out_dir", type=_DIR)
@click.option("--problems", required=True, type=_DIR,
              help="The problems folder the run was over (its manifest is the dataset).")
@_publish_options
@click.option("--json", "as_json", is_flag=True)
def publish_cmd(out_dir: Path, problems: Path, as_json: bool, **options: Any) -> None:
    """Log a finished suite run (OUT_DIR of `ktl suite run` or `merge`) as one claim: each
    judged problem's kernel, verification and benchmark entries as `ktl publish` logs them,
    then a signed suite statement naming every entry, the dataset and the summary."""
    out = Output(as_json)

    def body() -> int:
        if options["key_path"] is None:
            raise InputError("--key is required (the signing key)")
        report = _publish(out, out_dir, problems, options)
        out.result(report, lambda c: _render_published(c, report))
        return 0

    run_guarded(out, body)


@suite_group.command("verify")
@click.option("--index", required=True, type=click.IntRange(min=0),
              help="The suite statement's log index (in `ktl suite publish`'s report).")
@click.option("--problems", type=_DIR, default=None,
              help="Also check that this problems folder is the dataset the suite names.")
@click.option("--no-solutions", is_flag=True,
              help="Skip fetching each named kernel's source archive to check the row's "
                   "solution_sha256 against its logged solution file.")
@log_option
@log_key_option
@witness_policy_option
@click.option("--json", "as_json", is_flag=True)
def verify_cmd(index: int, problems: Path | None, no_solutions: bool, as_json: bool,
               **conn: Any) -> None:
    """Check a logged suite statement: its signature and inclusion, that every entry it names
    is in the log with the named digest, by the same key, about that problem's kernel, that
    its figures and summary recompute from them, and that each row's solution_sha256 is the
    logged kernel's solution file. Exit 0 verified, 1 not."""
    out = Output(as_json)

    def body() -> int:
        sess = connect(require_url(conn["log_url"]), TrustedState(), conn["log_key"],
                       witness_policy=load_witness_policy(conn["witness_policy_path"]))
        try:
            report = verify_suite(sess, index, solutions=not no_solutions)
        finally:
            sess.close()
        data = {"index": index, "verified": True, **report.to_json()}
        if problems is not None:
            here = hashlib.sha256(dataset_manifest(problems)).hexdigest()
            if here != report.claim.dataset_sha256:
                raise VerificationFailed(f"{problems} is not the suite's dataset (its manifest "
                                         f"is sha256:{here[:16]}…, the suite names "
                                         f"sha256:{report.claim.dataset_sha256[:16]}…)")
            data["dataset_checked"] = str(problems)
        out.result(data, lambda c: _render_verified(c, data))
        return 0

    run_guarded(out, body)


def _render_published(c: Console, report: dict[str, Any]) -> None:
    suite = report["suite"]
    c.print(safe(f"Published suite {report['name']} (dataset sha256:"
                 f"{report['dataset_sha256'][:16]}…) to {report['origin']}: entry "
                 f"{suite['index']}, receipt {suite['proof_path']}"), highlight=False)
    s = report["summary"]
    c.print(safe(f"  {len(report['rows'])} problems named; correct {s['correct_pct']}%, "
                 f"fast_1 {s['fast_p']['1']}%, trusted {s['trusted_pct']}%"), highlight=False)
    c.print(safe(f"Check it: ktl suite verify --index {suite['index']}"), highlight=False)


def _render_verified(c: Console, data: dict[str, Any]) -> None:
    s = data["summary"]
    c.print(safe(f"Suite entry {data['index']} verified: {data['name']}, {data['rows']} "
                 f"problems, {data['checked_entries']} named entries each in the log with "
                 f"the named digest; the summary recomputes (correct {s['correct_pct']}%, "
                 f"{_fast_p(s['fast_p'])}, trusted {s['trusted_pct']}%)"), highlight=False)
    if data["solutions_checked"]:
        c.print("  every row's solution_sha256 is its logged kernel's solution file",
                highlight=False)
    else:
        c.print("  solutions not checked (--no-solutions)", highlight=False)


def _medians(f: dict[str, Any]) -> str:
    """`68` without a bench, `95 (60 + 31)` with one (import and check, then the bench)."""
    whole = f"{f['median_seconds']:.0f}"
    if not f.get("median_bench_seconds"):
        return whole
    return f"{whole} ({f['median_check_seconds']:.0f} + {f['median_bench_seconds']:.0f})"


def _fast_p(figures: dict[str, Any]) -> str:
    """`fast_1 40.0%, fast_1.5 20.0%, fast_2 20.0%` (never a Python repr)."""
    return ", ".join(f"fast_{p} {v}%" for p, v in figures.items())


def register(group: click.Group) -> None:
    """Add `suite run`, `merge`, `publish` and `verify` to the `ktl` group."""
    group.add_command(suite_group)
