"""`ktl repair`: rewrite a stopped log's derivable files (tiles, bundles) from its verified
entries; with ``--summaries``, its per-digest summaries from its entries."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

from client.output import clean
from ledger import LedgerError
from ledger.server import read_verifier_key
from ledger.storage import (
    DB_NAME,
    SqliteStorage,
    StorageError,
    SummarySource,
    audit_log,
    check_summaries,
    open_storage,
    repair_log,
)
from ledger.tlog.note import NoteVerifier

if TYPE_CHECKING:
    from ledger.storage import SummaryCheck, SummaryCursor, SummarySource


@click.command("repair")
@click.option("--data", "data_dir", default=None,
              type=click.Path(file_okay=False, exists=True),
              help="The log's data folder (stop `ktl serve` first; the integration lock is taken).")
@click.option("--database", default=None, envvar="KTL_DATABASE", metavar="URL",
              help="With --summaries: a PostgreSQL log's database URL instead of --data.")
@click.option("--key-file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Log key file if it is not in the data folder.")
@click.option("--check-only", is_flag=True, help="List what is damaged; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
@click.option("--summaries", is_flag=True,
              help="Instead: check the per-digest summaries against the entries and rewrite "
                   "those that disagree (only these rows; with --check-only, list them).")
def repair(data_dir: str | None, database: str | None, key_file: str | None,
           check_only: bool, as_json: bool, summaries: bool) -> None:
    """Audit the log deeply and rewrite every damaged or missing tile, bundle or checkpoint file.

    Only files derivable from entries that hash to their leaves under a signed root are
    written. A lost object (an entry, a checkpoint row, stored hashes, the database itself)
    is named and nothing is touched: exit 1, restore it from a backup.

    The summaries the explorer reads (entries per predicate type and digest) are derived
    from the entries too: `--summaries` (of a SQLite log, or of a PostgreSQL one with
    --database) recomputes them 1,000 entries per transaction, showing progress, rewriting
    only the rows that disagree (a second run changes nothing); with --check-only it lists
    them and exits 1 if there are any.
    """

    if summaries or database is not None:
        if not summaries:
            raise click.UsageError("--database works with --summaries only: the files "
                                   "`ktl repair` rewrites live in the data folder")
        raise SystemExit(_summaries_main(data_dir, database, check_only, as_json))
    if data_dir is None:
        raise click.UsageError("give the log's --data folder")
    if not os.path.exists(os.path.join(data_dir, DB_NAME)):
        raise click.ClickException(f"{data_dir} holds no log database ({DB_NAME})")
    try:
        verifier = NoteVerifier.from_key_string(read_verifier_key(data_dir, key_file))
        storage = SqliteStorage(data_dir)
    except LedgerError as e:
        raise click.ClickException(str(e)) from None
    try:
        with storage.integration_lock():
            audit = audit_log(storage, verifier, verifier.name)
            if as_json:
                click.echo(json.dumps(audit.to_json(), indent=1))
            else:
                for problem in audit.problems:
                    # a problem quotes stored bytes (attacker-written): made inert first
                    click.echo(clean(problem))
                click.echo(f"audited {audit.size} entries: {len(audit.problems) + audit.more} "
                           "problems")
            if check_only or not audit.problems:
                raise SystemExit(1 if audit.problems else 0)
            try:
                written = repair_log(storage, verifier, verifier.name)
            except StorageError as e:
                click.echo(clean(f"error: {e}"), err=True)
                raise SystemExit(1) from None
            for path in written:
                click.echo(f"rewrote {path}", err=as_json)
    finally:
        storage.close()


def _summaries_main(data_dir: str | None, database: str | None, check_only: bool,
                    as_json: bool) -> int:
    """`ktl repair --summaries` on the SQLite log in `data_dir` or the PostgreSQL one at
    `database`, under the integration lock."""

    if database is None and (data_dir is None
                             or not os.path.exists(os.path.join(data_dir, DB_NAME))):
        raise click.ClickException(f"{data_dir} holds no log database ({DB_NAME})")
    try:
        storage = open_storage(data_dir if database is None else None, database)
    except LedgerError as e:
        raise click.ClickException(str(e)) from None
    try:
        total = storage.entry_count()
        with storage.integration_lock():
            if not isinstance(storage, SummarySource):
                raise click.ClickException("this storage keeps no digest summaries")
            return _repair_summaries(storage, total, check_only, as_json)
    finally:
        storage.close()


def _repair_summaries(storage: SummarySource, total: int, check_only: bool,
                      as_json: bool) -> int:

    def progress(so_far: SummaryCheck, cursor: SummaryCursor | None) -> None:
        if cursor is None:
            where = "done"
        elif cursor.digest is None:
            where = f"{min(cursor.index, total):,} of {total:,} entries"
        else:
            where = f"{total:,} of {total:,} entries, then the digests no entry names"
        click.echo(f"summaries: {where}: {so_far.digests:,} digests, {so_far.wrong:,} rows "
                   "disagree", err=True)

    result = check_summaries(storage, fix=not check_only, progress=progress)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        for d in result.drift:
            click.echo(clean(f"summary {d.digest} {d.predicate_type}: stored {d.stored}, "
                             f"the entries give {d.expected}"))
        verb = "rewrote" if result.fixed else "found"
        click.echo(f"checked {result.digests:,} digests: {verb} {result.wrong:,} summary "
                   "rows that disagree with the entries")
    return 1 if check_only and result.wrong else 0


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(repair)
