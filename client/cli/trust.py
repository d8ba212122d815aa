"""`ktl trust list | forget URL`: show and drop the log pins kept in `$KTL_HOME`."""

from __future__ import annotations

import click
from rich.console import Console

from client.errors import ClientError, InputError
from client.output import Output, rows_table, run_guarded, safe
from client.state import LogRef, Pin, TrustedState, normalize_log_url
from client.trust import load_verifier, open_signed


@click.group()
def trust() -> None:
    """Show or drop the origin and key pinned for each log URL."""


@trust.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def trust_list(as_json: bool) -> None:
    """List every pinned log URL with its origin, key, how it was pinned and the size trusted."""
    out = Output(as_json)

    def body() -> int:
        state = TrustedState()
        rows = []
        for pin in state.pins():
            rows.append({**pin.to_json(), "trusted_size": _trusted_size(state, pin)})

        def render(c: Console) -> None:
            if not rows:
                c.print(safe(f"no log pinned in {state.home}"))
                return
            c.print(rows_table(f"Pinned logs ({state.home})",
                               ["url", "origin", "key", "how", "pinned at", "trusted size"],
                               [(r["url"], r["origin"], r["log_key"], r["how"], r["pinned_at"],
                                 "-" if r["trusted_size"] is None else r["trusted_size"])
                                for r in rows]))

        out.result({"home": str(state.home), "pins": rows}, render)
        return 0

    run_guarded(out, body)


@trust.command("forget")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def trust_forget(url: str, as_json: bool) -> None:
    """Drop the pin for URL (and its origin's trusted checkpoint, unless another URL pins it).

    The next contact trusts the log at URL on first use again (or the --log-key given),
    so do this only after checking the log's new key out of band.
    """
    out = Output(as_json)

    def body() -> int:
        state = TrustedState()
        where = normalize_log_url(url)
        pin = state.forget(where)
        if pin is None:
            raise InputError(f"no log is pinned for {where} (see `ktl trust list`)")
        ref = _ref(pin)
        others = [p for p in state.pins() if p.origin == pin.origin]
        shared = any(_ref(p) == ref for p in others)  # another URL of the same log
        dropped = False if shared else state.drop_checkpoint(ref, legacy=not others)
        data = {"forgotten": pin.to_json(), "checkpoint_dropped": dropped}

        def render(c: Console) -> None:
            c.print(safe(f"forgot the pin for {pin.url}: origin {pin.origin}, key {pin.log_key}"))
            c.print("its trusted checkpoint was dropped too" if dropped else
                    "its origin's trusted checkpoint was kept" + (
                        " (another URL pins the same origin)" if shared else ""))

        out.result(data, render)
        return 0

    run_guarded(out, body)


def _ref(pin: Pin) -> LogRef:
    try:
        key = load_verifier(pin.log_key).key_string()
    except ClientError:
        key = pin.log_key
    return LogRef(pin.origin, key)


def _trusted_size(state: TrustedState, pin: Pin) -> int | None:
    """The size of the checkpoint trusted for the pin's origin, verified under the pinned key."""
    note = state.checkpoint(_ref(pin)) or state.legacy_checkpoint(pin.origin)
    if note is None:
        return None
    try:
        return open_signed(note, load_verifier(pin.log_key), pin.origin).checkpoint.size
    except ClientError:
        return None


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(trust)
