"""How `ktl` commands talk to people and scripts: rich tables, `--json`, progress, exit codes.

A command builds a JSON-able result and a function that renders it as a table;
`Output.result` prints one or the other. `run_guarded` turns the client's
exceptions into one clear line on stderr (or a JSON error object) and the
documented exit code: 0 ok, 1 verification failed, 2 usage or input error,
3 network or server error, 4 inconclusive, 5 unsupported (`ktl reproduce`: a weak claim not
confirmed; docs/reproducing.md, "Verdicts").
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from attest import AttestError
from client.errors import (
    EXIT_NETWORK,
    EXIT_USAGE,
    ClientError,
    LogMisbehaviour,
    MemoryBoundReached,
)
from ledger import LedgerError

#: Terminal escape sequences: CSI (ESC [ ... final), OSC / DCS / SOS / PM / APC strings up to
#: BEL or ST, and two-byte ESC sequences; then every other C0/C1 control except tab and newline,
#: DEL, and the bidirectional overrides that reorder what a reader sees.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|[\x1b][\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -~]?")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

#: Width of tables when stdout is not a terminal (CI logs, pipes): wide enough not to fold.
PIPE_WIDTH = 240


def clean(value: object) -> str:
    """`value` as text with every terminal escape sequence and control character removed.

    Logged entries, kernel sources, compiler output and server messages are attacker-written;
    this is the one place that makes them inert for a terminal (see `safe` for rich).
    """
    text = "" if value is None else str(value)
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def safe(value: object, style: str = "") -> Text:
    """`clean(value)` as a rich `Text`, which rich never parses as markup."""
    return Text(clean(value), style=style)


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, soft_wrap=True, width=PIPE_WIDTH if wide else None)


class Output:
    """Where a command's results, notes and progress go."""

    def __init__(self, as_json: bool, *, quiet: bool = False) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.console = _console(stderr=False)
        self.err = _console(stderr=True)

    def note(self, message: str, style: str = "") -> None:
        """A human note on stderr (kept off stdout so `--json` output stays parseable).

        `message` is plain text, never markup: it is cleaned with `safe` and shown in `style`.
        """
        if not self.quiet:
            self.err.print(safe(message, style), highlight=False)

    def key_note(self, how: str, describe: str) -> None:
        """How the log's key was chosen (`KeyChoice`): trust on first use stands out."""
        self.note(describe, "bold yellow" if how == "tofu" else "dim")

    def result(self, data: Any, render: Callable[[Console], None], *, one_line: bool = False) -> None:
        """Print `data` as JSON (`one_line`: a JSON Lines record) or render it for people."""
        if self.as_json:
            text = json.dumps(data, sort_keys=True) if one_line else json.dumps(
                data, indent=2, sort_keys=True)
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        else:
            render(self.console)

    @contextmanager
    def progress(
        self, description: str, total: int | None
    ) -> Iterator[Callable[[int, int | None], None]]:
        """A progress bar on stderr; yields `advance_to(completed, total=None)`."""
        bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeRemainingColumn(), console=self.err, transient=True,
            disable=self.quiet or not self.err.is_terminal,
        )
        with bar:
            task = bar.add_task(description, total=total)

            def advance_to(completed: int, new_total: int | None = None) -> None:
                if new_total is not None:
                    bar.update(task, total=new_total)
                bar.update(task, completed=completed)

            yield advance_to

    def fail(self, exc: ClientError) -> NoReturn:
        code = exc.exit_code
        if self.as_json:
            err: dict[str, Any] = {"error": {"type": type(exc).__name__, "message": str(exc),
                                             "exit_code": code}}
            if exc.kind is not None:
                err["error"]["kind"] = exc.kind
            if isinstance(exc, LogMisbehaviour) and exc.evidence_path is not None:
                err["error"]["evidence"] = str(exc.evidence_path)
            sys.stdout.write(json.dumps(err, indent=2) + "\n")
        label = {1: "VERIFICATION FAILED", 2: "error", 3: "network error", 4: "inconclusive",
                 5: "unsupported", 130: "stopped"}
        line = Text.assemble((f"{label.get(code, 'error')}: ", "bold red"), safe(exc))
        self.err.print(line, highlight=False)
        sys.exit(code)


def kv_table(title: str, rows: Sequence[tuple[str, Any]]) -> Table:
    """A two-column key/value table."""
    table = Table(title=safe(title), show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        # a structured value as JSON, never a Python repr ({'reproductions': [], ...})
        shown = json.dumps(value, sort_keys=True, ensure_ascii=False) \
            if isinstance(value, dict | list | tuple) else value
        table.add_row(safe(key), safe(shown))
    return table


def rows_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               styles: Sequence[str] = ()) -> Table:
    """A table with a header; `styles[i]` (when given) styles row i, e.g. "dim"."""
    table = Table(title=safe(title), title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for i, row in enumerate(rows):
        table.add_row(*(safe(v) for v in row), style=styles[i] if i < len(styles) else None)
    return table


def memory_bound_message() -> str:
    """What ktl says when its own process could not allocate: the bound, where it came from."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft == resource.RLIM_INFINITY:
        return "ktl ran out of memory (no bound on its own memory was set: the machine's)"
    return (f"ktl reached its own memory bound: {soft:,} bytes of data (RLIMIT_DATA, set by "
            "`ktl suite run --memory-limit`); nothing half-written was kept. Raise the bound, "
            "or run the problem at smaller sizes")


def run_guarded(out: Output, fn: Callable[[], int | None]) -> NoReturn:
    """Run a command body; map errors to exit codes; exit with the body's code (0 default)."""

    try:
        code = fn()
    except ClientError as exc:
        out.fail(exc)
    except (AttestError, LedgerError) as exc:
        wrapped = ClientError(f"{type(exc).__name__}: {exc}")
        wrapped.exit_code = EXIT_USAGE
        out.fail(wrapped)
    except MemoryError:
        out.fail(MemoryBoundReached(memory_bound_message()))
    except KeyboardInterrupt:
        out.err.print("interrupted; nothing half-written was kept (state files are replaced "
                      "atomically)", highlight=False)
        sys.exit(130)
    except OSError as exc:
        wrapped = ClientError(f"{exc}")
        wrapped.exit_code = EXIT_NETWORK if isinstance(exc, ConnectionError) else EXIT_USAGE
        out.fail(wrapped)
    sys.exit(code or 0)
