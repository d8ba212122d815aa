"""`ktl repair`: rewrite a stopped log's derivable files (tiles, bundles) from its verified entries."""

from __future__ import annotations

import json
import os

import click


@click.command("repair")
@click.option("--data", "data_dir", required=True,
              type=click.Path(file_okay=False, exists=True),
              help="The log's data folder (stop `ktl serve` first; the integration lock is taken).")
@click.option("--key-file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Log key file if it is not in the data folder.")
@click.option("--check-only", is_flag=True, help="List what is damaged; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
def repair(data_dir: str, key_file: str | None, check_only: bool, as_json: bool) -> None:
    """Audit the log deeply and rewrite every damaged or missing tile, bundle or checkpoint file.

    Only files derivable from entries that hash to their leaves under a signed root are
    written. A lost object (an entry, a checkpoint row, stored hashes, the database itself)
    is named and nothing is touched: exit 1, restore it from a backup.
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


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(repair)
