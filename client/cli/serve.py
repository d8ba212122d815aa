"""`ktl serve` (run the log), `ktl log-key` (print its verifier key), `ktl migrate`."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import click

from client.errors import InputError
from client.serving import ServeSettings
from ledger import LedgerError
from ledger.serve import ServeError, run_server
from ledger.server import log_key_path, read_verifier_key
from ledger.storage import DB_NAME, StorageError, copy_log, open_storage
from ledger.tlog.note import NoteVerifier


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)


@click.command("serve")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="Data folder (SQLite database, tile files, log key); created if missing. "
                   "With --database it keeps only the log key.")
@click.option("--database", default=None, envvar="KTL_DATABASE", metavar="URL",
              help="postgresql://... URL (or $KTL_DATABASE): keep the log in PostgreSQL, "
                   "shared by any number of frontends.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0 picks a free one; the URL is printed).")
@click.option("--origin", default=None,
              help="Log origin (checkpoint first line); fixed by the key on first start.")
@click.option("--key", "key_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Use this PRIVATE+KEY file instead of <data>/log.key.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="gunicorn worker processes (about one per core).")
@click.option("--threads", default=32, show_default=True, type=click.IntRange(1, 512),
              help="Threads per worker (submissions wait for their batch).")
@click.option("--token-env", default=None, metavar="VAR",
              help="Require 'Authorization: Bearer $VAR' for writes.")
@click.option("--max-batch", default=1000, show_default=True, type=click.IntRange(1, 10000),
              help="Most entries accepted by one entries:batch request.")
@click.option("--batch-size", default=4096, show_default=True, type=click.IntRange(1, 100000),
              help="Most entries integrated under one checkpoint.")
@click.option("--batch-delay-ms", default=5.0, show_default=True, type=click.FloatRange(0, 10000),
              help="How long the integrator waits to fill a batch.")
@click.option("--rate", default=20000.0, show_default=True, type=click.FloatRange(0.001),
              help="Submissions per second per client address (shared by all workers).")
@click.option("--rate-bytes", default=1024 * 1024.0, show_default=True,
              type=click.FloatRange(1), metavar="BYTES",
              help="Request bytes of submissions per second per client address (burst: 4 s "
                   "of it, at least 4 MiB); with open writes, all anonymous writers share one "
                   "such budget too.")
@click.option("--blob-grace", default=24 * 3600.0, show_default=True,
              type=click.FloatRange(1, 30 * 24 * 3600.0), metavar="SECONDS",
              help="Delete blobs that no logged entry references this long after upload.")
@click.option("--blob-budget", default=1024 * 1024 * 1024, show_default=True,
              type=click.IntRange(min=1), metavar="BYTES",
              help="Blob bytes each client address may upload per hour (shared by all workers; "
                   "with open writes, all anonymous writers share one such budget too, which "
                   "bounds the unreferenced blobs kept to this times the grace period).")
@click.option("--witness-policy", "witness_policy", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, exists=True),
              help="Witness policy (witness NAME VKEY URL / group / quorum): ask these witnesses "
                   "to cosign each checkpoint and publish it once the quorum is met.")
@click.option("--witness-wait", default=10.0, show_default=True, type=click.FloatRange(0.1, 600),
              metavar="SECONDS",
              help="How long a submission waits for a cosigned checkpoint before a 503.")
@click.option("--reproduce-tolerance", type=click.FloatRange(0.0, 1.0), default=None,
              help="Suggest this tolerance to `ktl reproduce` clients (0.05 = 5%).")
@click.option("--reproduce-confidence", type=click.FloatRange(0.5, 1.0, max_open=True),
              default=None, help="Suggest this confidence to `ktl reproduce` clients.")
@click.option("--reproducers", "reproducers", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, exists=True),
              help="TOML of [[reproducer]] tables (name, keys, key_files) and an optional "
                   "reproducer_quorum: reproducers the explorer names beside their verdicts, "
                   "and how many settle a claim; other keys' verdicts show as unknown.")
@click.option("--access-log/--no-access-log", default=False, help="Log every request.")
@click.option("--deep-check", is_flag=True,
              help="Before serving, re-hash every entry and compare every bundle file.")
@click.option("--boot-timeout", default=60.0, show_default=True,
              type=click.FloatRange(1, 3600), metavar="SECONDS",
              help="How long the workers have to boot and answer; past it, or when a worker "
                   "fails to boot, ktl serve stops with an error (exit 1) instead of serving.")
def serve(**options: Any) -> None:
    """Run the transparency log in the foreground.

    SIGTERM stops it gracefully (requests in flight are answered first); Ctrl-C stops
    it at once. Either way nothing acknowledged is lost: an entry is acknowledged only
    after its batch and checkpoint are durable.
    """
    try:
        config, opts = ServeSettings(**options).resolve()
    except InputError as e:
        _fail(str(e), 2)
    try:
        run_server(config, opts, progress=lambda line: click.echo(line))
    except (StorageError, ServeError) as e:
        _fail(str(e), 1)
    except LedgerError as e:
        _fail(str(e), 2)


@click.command("log-key")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="The log's data folder.")
@click.option("--key", "key_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="A PRIVATE+KEY file instead of <data>/log.key.")
def log_key(data_dir: str, key_file: str | None) -> None:
    """Print the log's verifier key string (give it to clients and witnesses)."""

    try:
        click.echo(read_verifier_key(data_dir, key_file))
    except LedgerError as e:
        _fail(str(e), 2)


@click.command("migrate")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="The data folder: its SQLite log and its log key.")
@click.option("--database", required=True, envvar="KTL_DATABASE", metavar="URL",
              help="postgresql://... URL (or $KTL_DATABASE).")
@click.option("--key", "key_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="A PRIVATE+KEY file instead of <data>/log.key.")
@click.option("--to", "target", type=click.Choice(["postgresql", "sqlite"]), default="postgresql",
              show_default=True,
              help="postgresql: copy the SQLite log into the empty database; sqlite: the "
                   "reverse (a backup into a data folder without a log).")
def migrate(data_dir: str, database: str, key_file: str | None, target: str) -> None:
    """Copy a whole log between SQLite and an empty PostgreSQL database, and prove the copy.

    Every checkpoint is copied; the copy is then checked in full (entries re-hashed, the
    root recomputed and compared with the signed checkpoint) and must end with the
    source's checkpoint, byte for byte.
    """

    if target == "postgresql" and not os.path.exists(os.path.join(data_dir, DB_NAME)):
        _fail(f"no SQLite log in {data_dir} (no {DB_NAME}) to copy", 2)
    if key_file is None and not log_key_path(data_dir).exists():
        _fail(f"no log key at {log_key_path(data_dir)}: give --key FILE "
              "(the copy is verified with it)", 2)

    def progress(what: str, done: int, total: int) -> None:
        click.echo(f"copied {done:,}{f' of {total:,}' if total else ''} {what}", err=True)

    try:
        verifier = NoteVerifier.from_key_string(read_verifier_key(data_dir, key_file))
        sqlite = open_storage(data_dir)
        try:
            pg = open_storage(None, database)
        except BaseException:
            sqlite.close()
            raise
        try:
            src, dst = (sqlite, pg) if target == "postgresql" else (pg, sqlite)
            result = copy_log(src, dst, verifier, verifier.name, progress)
        finally:
            sqlite.close()
            pg.close()
    except StorageError as e:
        _fail(str(e), 1)
    except LedgerError as e:
        _fail(str(e), 2)
    root = "-" if result.checkpoint is None else result.checkpoint.root_hash.hex()
    click.echo(f"copied {result.size:,} entries, {result.checkpoints:,} checkpoints, "
               f"{result.blobs:,} blobs into {target}")
    click.echo(f"verified: the copy's root {root} at size {result.size:,} matches the source's "
               "signed checkpoint")


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(serve)
    group.add_command(log_key)
    group.add_command(migrate)
