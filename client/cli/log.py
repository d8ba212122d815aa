"""`ktl publish | verify | get | search | log-info | monitor` (see docs/auditing.md and docs/publishing.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from attest.text import plural
from client.claims_view import ClaimReproductions
from client.monitor import MonitorOptions, MonitorReport, watch
from client.output import Output, kv_table, rows_table, run_guarded, safe
from client.publish import PublishOptions, run_publish
from client.receipts import (
    GetOptions,
    ReceiptReport,
    ShownEntry,
    VerifyOptions,
    show_entry,
    verify_receipt_files,
)
from client.session import connect, log_summary, require_url
from client.state import TrustedState
from client.vindex import DEFAULT_MAX_PAGES, Found, SearchOptions, search_log
from client.witnesses import load_witness_policy, witness_policy_option
from ledger.vindex import MAX_PAGE

F = TypeVar("F", bound=Callable[..., Any])
def log_option(fn: F) -> F:
    return click.option("--log", "log_url", envvar="KTL_LOG", metavar="URL",
                        help="Log base URL (default: $KTL_LOG).")(fn)


def log_key_option(fn: F) -> F:
    return click.option(
        "--log-key", envvar="KTL_LOG_KEY", metavar="KEYSTRING",
        help="The log's note verifier key (name+keyid+base64). Without it the key pinned "
             "in $KTL_HOME is used, or the log's advertised key is trusted on first use.",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")(fn)


# -- publish ------------------------------------------------------------------------------


@click.command()
@click.argument("kernel_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--key", "key_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="Your Ed25519 private key (from `ktl keygen`).")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt --key with the passphrase held in environment variable VAR.")
@click.option("--results", "results_path", type=click.Path(path_type=Path, dir_okay=False),
              help='JSON {"verification": <ktl check --json>, "benchmark": <ktl bench --json>}; '
                   "without it the checks and benchmark are run now.")
@click.option("--verification", "verification_path",
              type=click.Path(path_type=Path, dir_okay=False),
              help="Instead of --results: the output of `ktl check --json`.")
@click.option("--benchmark", "benchmark_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Instead of --results: the output of `ktl bench --json`.")
@click.option("--samples", "samples_path", type=click.Path(path_type=Path, dir_okay=False),
              help="The raw samples file of `ktl bench --samples-out` (uploaded as a blob).")
@click.option("--budget", type=click.Choice(["quick", "full"]), default="quick", show_default=True,
              help="Verification budget when running the checks (no results given).")
@click.option("--runs", type=click.IntRange(1, 64), default=None,
              help="Independent benchmark runs when measuring now (no results given); while "
                   "they disagree, as many more at a time, up to 15 in all (or --runs, if "
                   "more) [default: 5].")
@click.option("--allow-weak", is_flag=True,
              help="Publish a weak benchmark (its own record says its measurement was "
                   "disturbed: steal or throttling, other load on its pinned CPU, an interval "
                   "wider than +-10 %, fewer than 3 runs); reproductions that cannot confirm "
                   "it say UNSUPPORTED.")
@log_option
@log_key_option
@witness_policy_option
@json_option
def publish(as_json: bool, **options: Any) -> None:
    """Sign and log a kernel's release, verification and benchmark; keep receipts."""
    out = Output(as_json)
    run_guarded(out, lambda: _show_published(out, run_publish(PublishOptions(**options), out)))


def _show_published(out: Output, report: dict[str, Any]) -> int:
    def render(c: Console) -> None:
        c.print(rows_table(
            f"Published {report['name']} (sha256:{report['subject_sha256'][:16]}…) "
            f"to {report['origin']}",
            ["kind", "index", "tree size", "receipt"],
            [(p["kind"], p["index"], p["tree_size"], p["proof_path"])
             for p in report["entries"]],
        ))
        c.print("Every inclusion proof and checkpoint signature was verified before the "
                "receipts were written.")
        c.print(safe(f"What was signed (by key {report['signer'][:16]}…):", "bold"))
        _print_views(c, report["signed"])

    out.result(report, render)
    return 0


# -- verify -------------------------------------------------------------------------------


@click.command()
@click.argument("receipt", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--entry", "entry_path", type=click.Path(path_type=Path, dir_okay=False),
              help="The logged entry (default: RECEIPT with .tlog-proof -> .entry.json).")
@click.option("--log-key", envvar="KTL_LOG_KEY", metavar="KEYSTRING",
              help="The log's note verifier key (required, or $KTL_LOG_KEY).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML: which keys may sign which kernel names.")
@click.option("--source", "source_path", type=click.Path(path_type=Path),
              help="Source file or kernel folder whose digest must match the entry's subject.")
@click.option("--witness", "witness_keys", multiple=True, metavar="KEYSTRING",
              help="A witness's cosignature/v1 verifier key (repeatable).")
@click.option("--witness-threshold", type=click.IntRange(min=0), default=None,
              help="Valid witness cosignatures required (default: 1 when --witness is given).")
@witness_policy_option
@click.option("--log", "log_url", metavar="URL",
              help="Also prove the receipt consistent with the log's latest checkpoint "
                   "(verify stays offline without it, even when $KTL_LOG is set).")
@json_option
def verify(as_json: bool, **options: Any) -> None:
    """Verify a receipt offline: checkpoint, inclusion, signature, policy, source digest."""
    out = Output(as_json)
    opts = VerifyOptions(**options)
    run_guarded(out, lambda: _show_receipt(out, opts.receipt, verify_receipt_files(opts)))


def _show_receipt(out: Output, receipt: Path, report: ReceiptReport) -> int:
    def render(c: Console) -> None:
        rows: list[tuple[str, Any]] = [
            ("checkpoint signature", f"OK ({report.origin}, size {report.tree_size})"),
            ("inclusion proof", f"OK (entry {report.index}, leaf {report.leaf_hash[:16]}…)"),
            ("envelope signature", "OK (" + ", ".join(k[:16] + "…"
                                                      for k in report.signer_keyids) + ")"),
            ("statement", f"{report.predicate_type}"),
            ("subject", f"{report.subject_name} sha256:{report.subject_sha256}"),
            ("trust policy", report.policy or "not checked (no --policy)"),
            ("source", report.source or "not checked (no --source)"),
            ("witnesses", "; ".join(report.notes) if report.notes
             else "not checked (no --witness or --witness-policy)"),
        ]
        if report.consistent_with is not None:
            rows.append(("log consistency",
                         f"OK (consistent with the log's size {report.consistent_with})"))
        c.print(kv_table(f"Receipt {receipt}: VERIFIED", rows))

    out.result(report.to_json(), render)
    return 0


# -- get ----------------------------------------------------------------------------------


_SHOWN_APART = ("statement", "signed", "reproduced")
"""`ktl get`'s fields rendered apart from its key/value table (`reproduced` by
`_print_reproductions`, below it), never as one cell."""


@click.command()
@click.option("--index", required=True, type=click.IntRange(min=0), help="Entry index.")
@click.option("--out", "out_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the entry bytes here and its tlog-proof receipt beside it.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML: name the reproducers it trusts beside their verdicts.")
@log_option
@log_key_option
@witness_policy_option
@json_option
def get(as_json: bool, **options: Any) -> None:
    """Fetch one entry, verify its proof and signature, show what it claims, optionally save
    it as a receipt."""
    out = Output(as_json)
    opts = GetOptions(**options)
    run_guarded(out, lambda: _show_entry(out, opts.index, show_entry(opts)))


def _show_entry(out: Output, index: int, shown: ShownEntry) -> int:
    out.key_note(*shown.key_note)

    def render(c: Console) -> None:
        rows = [(k, v) for k, v in shown.data.items() if k not in _SHOWN_APART]
        c.print(kv_table(f"Entry {index} (verified)", rows))
        if shown.view is not None:
            c.print(safe("What was signed:", "bold"))
            _print_views(c, [shown.view.to_json()])
        if shown.found is not None:
            _print_reproductions(c, shown.found)

    out.result(shown.data, render)
    return 0


def _print_reproductions(c: Console, found: ClaimReproductions) -> None:
    """The named reproducers' verdicts first, strangers' muted, and what was cut off."""
    if found.seen:
        c.print(rows_table("Reproductions of this claim", ["entry", "verdict", "by"],
                           [(s.index, s.verdict.upper() if s.trusted else s.verdict, s.by)
                            for s in found.seen],
                           ["" if s.trusted else "dim" for s in found.seen]))
    else:
        c.print(safe("Not reproduced yet (no reproduction entry names this claim)."))
    note = found.strangers_note()
    if note:
        c.print(safe(f"Cut off: {note}.", "bold yellow"))
    c.print(safe(f"Independently: {found.summary()}", "bold"))


def _print_views(c: Console, views: list[dict[str, Any]]) -> None:
    """The tables of `client.claims_view` (as JSON), each with its legend."""
    for v in views:
        c.print(rows_table(v["title"], v["columns"], v["rows"]))
        if v["legend"]:
            c.print(safe(v["legend"], "dim"))


# -- search -------------------------------------------------------------------------------


@click.command()
@click.option("--digest", help="Subject sha256 (hex) of a kernel source archive.")
@click.option("--name", help="Kernel name, e.g. acme/matmul-blocked.")
@click.option("--key", "key", help="Signer keyid (hex) or a public key file.")
@click.option("--type", "ptype", help="Predicate type URI or kernel|benchmark|verification|"
                                      "reproduction.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000),
              help="At most this many results.")
@click.option("--unverified", is_flag=True,
              help="List the log's search rows without asking for the proof that the list "
                   "is complete (for a log that commits to no index).")
@click.option("--max-pages", default=DEFAULT_MAX_PAGES, show_default=True,
              type=click.IntRange(1, None),
              help="Read the index's list in at most this many pages; a longer list is not "
                   "proven complete (exit 4).")
@click.option("--page-size", default=MAX_PAGE, show_default=True,
              type=click.IntRange(1, MAX_PAGE), help="Entries of the list asked for a page.")
@log_option
@log_key_option
@json_option
def search(as_json: bool, **options: Any) -> None:
    """Find entries by subject digest, kernel name, signer key or predicate type.

    The list is proven complete against the log's signed checkpoint (its committed
    index) and the log's search rows must agree with it; --unverified skips that."""
    out = Output(as_json)
    run_guarded(out, lambda: _show_found(out, search_log(SearchOptions(**options), out)))


def _show_found(out: Output, found: Found) -> int:
    def render(c: Console) -> None:
        if found.proved is not None:
            c.print(safe(f"Search {found.proved.summary()}."))
        how = ("the list is proven complete" if found.proved is not None
               else "unverified index, not proven complete")
        c.print(rows_table(
            f"{plural(len(found.rows), 'entry', 'entries')} ({how}; "
            "`ktl get --index N` verifies each entry)",
            ["index", "name", "type", "subject sha256", "signers"],
            [(r["index"], r["subject_name"], r["predicate_type"].rsplit("/", 2)[-2],
              r["subject_sha256"][:16] + "…", ", ".join(k[:12] for k in r["keyids"]))
             for r in found.rows],
        ))

    out.result(found.to_json(), render)
    return 0


# -- log-info -----------------------------------------------------------------------------


@click.command("log-info")
@log_option
@log_key_option
@witness_policy_option
@json_option
def log_info(log_url: str | None, log_key: str | None, witness_policy_path: Path | None,
             as_json: bool) -> None:
    """Show the log's identity and verified checkpoint; prove it consistent with what we trust."""
    out = Output(as_json)
    run_guarded(out, lambda: _show_log(out, log_url, log_key, witness_policy_path))


def _show_log(out: Output, log_url: str | None, log_key: str | None,
              witness_policy_path: Path | None) -> int:
    sess = connect(require_url(log_url), TrustedState(), log_key,
                   witness_policy=load_witness_policy(witness_policy_path))
    out.key_note(sess.key.how, sess.key.describe())
    try:
        data = log_summary(sess)
    finally:
        sess.close()

    def render(c: Console) -> None:
        c.print(kv_table(f"Log {data['origin']}", [
            (k, v["summary"] if k == "witnesses" else v)
            for k, v in data.items() if k != "checkpoint"]))

    out.result(data, render)
    return 0


# -- monitor ------------------------------------------------------------------------------


@click.command()
@click.option("--since", type=click.IntRange(min=0), help="Start at this index (default: resume).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML; entries it rejects are violations.")
@click.option("--state", "state_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Monitor state file (default: $KTL_HOME/monitor/<log>.json).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Verify entry signatures in this many processes (catch-up on many cores).")
@click.option("--follow", is_flag=True,
              help="Keep watching: a new pass every --interval seconds, until a violation "
                   "(exit 1) or Ctrl-C.")
@click.option("--interval", default=30.0, show_default=True, type=click.FloatRange(0.1, 86400),
              help="Seconds between passes with --follow.")
@click.option("--passes", type=click.IntRange(min=1),
              help="With --follow: stop after this many passes (default: no limit).")
@log_option
@log_key_option
@witness_policy_option
@json_option
def monitor(as_json: bool, **options: Any) -> None:
    """Tail the log through its tiles: verify everything, report releases, reproductions
    (with their signers) and violations; exit 1 on a violation or a refutation by a
    reproducer the policy trusts.

    One pass checks everything new since the last pass (the state file) up to the log's
    current checkpoint; --follow repeats it. With --json, each pass prints one JSON line.
    """
    out = Output(as_json)
    opts = MonitorOptions(**options)
    if opts.passes is not None and not opts.follow:
        raise click.UsageError("--passes goes with --follow")
    run_guarded(out, lambda: watch(opts, out, lambda report, path: _monitor_result(
        out, report, path)))


def _monitor_result(out: Output, report: MonitorReport, path: Path) -> None:
    """One pass: a table for people, one JSON line (as `--help` promises) with --json."""
    data = report.to_json()
    data["state_file"] = str(path)

    def render(c: Console) -> None:
        if report.rejudged:
            c.print(safe("The policy changed since the last pass: every entry was judged again "
                         "under it, from index 0.", "bold yellow"))
        if report.start_index >= report.tree_size:
            c.print(safe(f"No new entries in {report.origin} since the last pass (tree size "
                         f"{report.tree_size})."))
        else:
            c.print(safe(f"Checked entries {report.start_index}..{report.tree_size - 1} of "
                         f"{report.origin}: {plural(report.entries_checked, 'entry', 'entries')}"
                         ", every tile verified against the signed checkpoint."))
        if report.findings:
            c.print(rows_table("Findings", ["index", "kind", "name", "detail"],
                               [(f.index, f.kind.upper() if f.kind in ("violation", "refutation")
                                 else f.kind, f.name, f.detail) for f in report.findings]))
        c.print(safe(f"{plural(len(report.violations), 'violation')}, "
                     f"{plural(len(report.refutations), 'refutation')} by trusted reproducers. "
                     f"State saved to {path}."))

    out.result(data, render, one_line=True)


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    for cmd in (publish, verify, get, search, log_info, monitor):
        group.add_command(cmd)

