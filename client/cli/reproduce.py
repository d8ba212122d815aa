"""`ktl reproduce`: re-run a logged kernel's claims here and give a verdict per claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from client.claims_view import SPEEDUP_MEANING
from client.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_UNSUPPORTED,
    EXIT_VERIFICATION,
)
from client.output import Output, rows_table, run_guarded, safe
from client.reproduce import ClaimSearch, Reproduced, ReproduceOptions, run_reproduce
from client.witnesses import witness_policy_option

_EXIT = {"confirmed": EXIT_OK, "refuted": EXIT_VERIFICATION, "inconclusive": EXIT_INCONCLUSIVE,
         "unsupported": EXIT_UNSUPPORTED}


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


@click.command()
@click.option("--index", required=True, type=click.IntRange(min=0),
              help="The logged kernel, benchmark or verification entry to reproduce.")
@click.option("--budget", type=click.Choice(["quick", "full"]), default="quick",
              show_default=True, help="How thorough the re-run checks are.")
@click.option("--runs", type=click.IntRange(1, 64), default=None,
              help="Independent benchmark runs here [default: 5].")
@click.option("--tolerance", type=click.FloatRange(0.0, 1.0), default=None,
              help="How much a speed-up claim may overstate the measurement and stand "
                   "(0.05 = 5%) [default: the log's, else 0.05].")
@click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=None,
              help="Confidence needed to refute a speed-up claim [default: the log's, else 0.99].")
@click.option("--time-budget", type=click.FloatRange(0.0, 3600.0), default=180.0,
              show_default=True, metavar="SECONDS",
              help="While a speed-up claim is undecided, keep measuring (a sequential test "
                   "whose error rates hold under optional stopping) for up to this long; "
                   "a refutation is put to a second sitting of runs within it.")
@click.option("--sign", "sign_key", type=click.Path(path_type=Path, dir_okay=False),
              help="Sign a reproduction/v1 attestation of the verdicts with this key.")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt --sign's key with the passphrase in environment variable VAR.")
@click.option("--submit", is_flag=True, help="Log the signed attestation (needs --sign).")
@click.option("--receipts", "receipt_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path(".ktl/receipts"), show_default=True,
              help="Where the signed attestation (and its receipt with --submit) is written.")
@click.option("--log", "log_url", envvar="KTL_LOG", metavar="URL",
              help="Log base URL (default: $KTL_LOG).")
@click.option("--log-key", envvar="KTL_LOG_KEY", metavar="KEYSTRING",
              help="The log's note verifier key (default: pinned, else trust on first use).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML: also use claims by keys it trusts for the kernel "
                   "(default: only the kernel publisher's own claims).")
@click.option("--allow-weak-sandbox", is_flag=True,
              help="Submit even where a sandbox layer is missing (recorded in the statement).")
@witness_policy_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def reproduce(as_json: bool, **options: Any) -> None:
    """Fetch a logged kernel and its claims, verify them, re-run them, give verdicts.

    Exit 0 when every claim is confirmed, 1 when any is refuted, 5 when a weak claim is
    unsupported (its own record says its measurement was disturbed; none refuted), 4 when
    inconclusive (docs/reproducing.md, "Verdicts").
    """
    out = Output(as_json)
    run_guarded(out, lambda: _show(out, run_reproduce(ReproduceOptions(**options), out)))


def _show(out: Output, done: Reproduced) -> int:
    result, data = done.result, done.to_json()
    verdict = str(result.body["verdict"])

    def render(c: Console) -> None:
        c.print(rows_table(
            f"Reproduction of entry {done.index}: {result.name} (sha256:{result.digest[:16]}…)",
            ["claim", "verdict", "claimed", "measured", "reason"],
            [(cl["claim"], cl["verdict"].upper(), _short(cl.get("claimed", {})),
              _short(cl.get("measured", {})), cl.get("reason", ""))
             for cl in result.body["claims"]],
        ))
        if any(str(cl["claim"]).startswith("benchmark") for cl in result.body["claims"]):
            c.print(safe(SPEEDUP_MEANING, "dim"))
        c.print(Text.assemble("Overall: ", safe(verdict.upper(), "bold")))
        _print_independently(c, data.get("independently", {}))
        _print_search(c, result.search)
        att = done.attestation
        if att:
            c.print(safe(f"Signed by key {att['signer'][:16]}… (readers name it as a "
                         "reproducer in their policy, or see it as an unknown key)"))
            c.print(safe(f"Signed reproduction attestation: {att['entry_path']}"
                         + (f" (logged at index {att['index']}, receipt {att['proof_path']})"
                            if att.get("index") is not None else "")))

    out.result(data, render)
    return _EXIT.get(verdict, EXIT_INCONCLUSIVE)


def _print_independently(c: Console, weighed: dict[str, Any]) -> None:
    for claim, found in weighed.items():
        c.print(safe(f"Independently (your policy's reproducer quorum), entry {claim}: "
                     f"{found['independently']['summary']}"))
        if found["strangers_note"]:
            c.print(safe(f"Cut off (entry {claim}): {found['strangers_note']}.", "bold yellow"))


def _print_search(c: Console, search: ClaimSearch) -> None:
    if search.skipped_total or not search.complete or search.proven_up_to is None:
        c.print(safe(f"Note: {search.summary()}"))
    else:
        c.print(safe("Claims searched: every entry about this digest, proven complete "
                     f"up to index {search.proven_up_to}"))


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(reproduce)
