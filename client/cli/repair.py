"""`ktl repair`: rewrite a stopped log's derivable files (tiles, bundles) from its verified
entries; with ``--summaries``, its per-digest summaries from its entries."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ledger.storage import SqliteStorage, SummaryCheck, SummaryCursor


@click.command("repair")
@click.option("--data", "data_dir", required=True,
              type=click.Path(file_okay=False, exists=True),
              help="The log's data folder (stop `ktl serve` first; the integration lock is taken).")
@click.option("--key-file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Log key file if it is not in the data folder.")
@click.option("--check-only", is_flag=True, help="List what is damaged; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
@click.option("--summaries", is_flag=True,
              help="Instead: check the per-digest summaries against the entries and rewrite "
                   "those that disagree (only these rows; with --check-only, list them).")
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 10_000),
              help="With --summaries: entries per transaction.")
def repair(data_dir: str, key_file: str | None, check_only: bool, as_json: bool,
           summaries: bool, batch: int) -> None:
    """Audit the log deeply and rewrite every damaged or missing tile, bundle or checkpoint file.

    Only files derivable from entries that hash to their leaves under a signed root are
    written. A lost object (an entry, a checkpoint row, stored hashes, the database itself)
    is named and nothing is touched: exit 1, restore it from a backup.

    The summaries the explorer reads (entries per predicate type and digest) are derived
    from the entries too: `--summaries` recomputes them batch by batch, showing progress,
    rewriting only the rows that disagree (a second run changes nothing); with --check-only
    it lists them and exits 1 if there are any.
    """
    from ledger import LedgerError
    from ledger.note import NoteVerifier
    from ledger.server import read_verifier_key
    from ledger.storage import DB_NAME, SqliteStorage, StorageError, audit_log, repair_log

    if not os.path.exists(os.path.join(data_dir, DB_NAME)):
        raise click.ClickException(f"{data_dir} holds no log database ({DB_NAME})")
    try:
        verifier = NoteVerifier.from_key_string(read_verifier_key(data_dir, key_file))
        storage = SqliteStorage(data_dir)
    except LedgerError as e:
        raise click.ClickException(str(e)) from None
    try:
        with storage.integration_lock():
            if summaries:
                raise SystemExit(_repair_summaries(storage, check_only, as_json, batch))
            audit = audit_log(storage, verifier, verifier.name)
            if as_json:
                click.echo(json.dumps(audit.to_json(), indent=1))
            else:
                for problem in audit.problems:
                    click.echo(f"{problem}")
                click.echo(f"audited {audit.size} entries: {len(audit.problems) + audit.more} "
                           "problems")
            if check_only or not audit.problems:
                raise SystemExit(1 if audit.problems else 0)
            try:
                written = repair_log(storage, verifier, verifier.name)
            except StorageError as e:
                click.echo(f"error: {e}", err=True)
                raise SystemExit(1) from None
            for path in written:
                click.echo(f"rewrote {path}", err=as_json)
    finally:
        storage.close()


def _repair_summaries(storage: SqliteStorage, check_only: bool, as_json: bool,
                      batch: int) -> int:
    from ledger.storage import check_summaries

    total = storage.entry_count()

    def progress(so_far: SummaryCheck, cursor: SummaryCursor | None) -> None:
        where = ("done" if cursor is None else f"{min(cursor.index, total):,} of {total:,} "
                 "entries" if cursor.digest is None else "unnamed digests")
        click.echo(f"summaries: {where}: {so_far.digests:,} digests, {so_far.wrong:,} rows "
                   "disagree", err=True)

    result = check_summaries(storage, fix=not check_only, batch=batch, progress=progress)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        for d in result.drift:
            click.echo(f"summary {d.digest} {d.predicate_type}: stored {d.stored}, "
                       f"the entries give {d.expected}")
        verb = "rewrote" if result.fixed else "found"
        click.echo(f"checked {result.digests:,} digests: {verb} {result.wrong:,} summary "
                   "rows that disagree with the entries")
    return 1 if check_only and result.wrong else 0


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(repair)
