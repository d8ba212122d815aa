"""`ktl witness serve | key | add-log | list-logs | remove-log`: run a C2SP tlog witness."""

from __future__ import annotations

import json

import click

from ledger import LedgerError
from ledger.serve import ServeError
from ledger.witness_server import WitnessOptions, read_witness_key, run_witness
from ledger.witness_store import WitnessStore, make_log


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)


_DATA = click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
                     help="The witness's data folder (key and SQLite database).")


@click.group()
def witness() -> None:
    """Run a witness that cosigns only consistent growth of the logs it knows."""


@witness.command("serve")
@_DATA
@click.option("--name", default=None,
              help="Witness key name (fixed when the key is created; default localhost/witness).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8090, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0 picks a free one; the URL is printed).")
def serve(data_dir: str, name: str | None, host: str, port: int) -> None:
    """Serve POST /add-checkpoint in the foreground (key created on first start)."""

    try:
        run_witness(WitnessOptions(data_dir, name, host, port),
                    progress=lambda line: click.echo(line))
    except ServeError as exc:  # its worker never came up: not a usage error
        _fail(str(exc), 1)
    except LedgerError as exc:
        _fail(str(exc), 2)


@witness.command("key")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="The witness's data folder.")
def key(data_dir: str) -> None:
    """Print the witness's cosignature verifier key string (the last line)."""

    try:
        click.echo(read_witness_key(data_dir).verifier_key_string())
    except LedgerError as exc:
        _fail(str(exc), 2)


@witness.command("add-log")
@_DATA
@click.option("--origin", required=True, help="The log's origin line.")
@click.option("--log-key", "log_keys", required=True, multiple=True,
              help="The log's verifier key string (repeatable).")
def add_log(data_dir: str, origin: str, log_keys: tuple[str, ...]) -> None:
    """Register a log (or replace its keys); the witness keeps what it already cosigned."""

    try:
        log = make_log(origin, log_keys)
        store = WitnessStore(data_dir)
        store.add_log(log)
        store.close()
    except LedgerError as exc:
        _fail(str(exc), 2)
    click.echo(f"witnessing {origin}")


@witness.command("list-logs")
@_DATA
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_logs(data_dir: str, as_json: bool) -> None:
    """List the logs this witness cosigns for, with the size it holds for each."""

    try:
        store = WitnessStore(data_dir)
        rows = []
        for log in store.logs():
            held = store.held(log.origin)
            rows.append({**log.to_json(), "held_size": None if held is None
                         else held.checkpoint.size})
        store.close()
    except LedgerError as exc:
        _fail(str(exc), 2)
    if as_json:
        click.echo(json.dumps({"logs": rows}, indent=2))
        return
    if not rows:
        click.echo("no logs registered")
    for r in rows:
        size = "-" if r["held_size"] is None else r["held_size"]
        click.echo(f"{r['origin']}  held size {size}  keys {' '.join(r['keys'])}")


@witness.command("remove-log")
@_DATA
@click.option("--origin", required=True, help="The log's origin line.")
def remove_log(data_dir: str, origin: str) -> None:
    """Stop cosigning for a log (what it held is kept, should it be added back)."""

    try:
        store = WitnessStore(data_dir)
        removed = store.remove_log(origin)
        store.close()
    except LedgerError as exc:
        _fail(str(exc), 2)
    if not removed:
        _fail(f"no log with origin {origin!r} is registered", 2)
    click.echo(f"no longer witnessing {origin}")


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(witness)
