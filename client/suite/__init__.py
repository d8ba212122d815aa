"""`ktl suite`: a KernelBench-layout folder of problems and their solutions, run whole.

`run_suite(settings, on_event)` imports, checks and benchmarks every entry (each step a
sandboxed `ktl` subprocess pinned to its job's CPU), resumably; `summarize` gives
KernelBench's figures (correct %, fast_p) beside ours (trusted, refused and why,
findings); `merge` joins shards run on other machines (`--shard K/N`).

`publish_suite` logs a finished run as one claim (each judged problem as `ktl publish` does,
then a signed `suite/v1` statement naming every entry); `verify_suite` checks such a
statement against the log (`read_suite`, `check_rows`: pure).

Holds `_entries` (the bottom: settings, entries, results, discovery, the dataset manifest),
`_run` (the runner), `_summary` (figures, CSV, merge), `_memory` (the bound on ktl's own
memory), `_publish` and `_verify`. May import
`attest`, `client.errors`, and for publishing and verifying `client.publish`,
`client.session`, `client.state` and `ledger.tlog`; the command is `client.cli.suite`.
"""

from __future__ import annotations

from client.suite._entries import (
    Entry,
    EntryResult,
    SuiteSettings,
    dataset_manifest,
    discover,
    kernel_name_of,
    shard_of,
)
from client.suite._memory import apply_bound, default_bound, parse_size
from client.suite._publish import PublishSettings, publish_suite, row_of, suite_body
from client.suite._run import Event, entry_path, load_results, run_entry, run_suite, usable_cpus
from client.suite._summary import CSV_COLUMNS, FAST_P, merge, refusal_kind, summarize, to_csv
from client.suite._verify import (
    RowProblem,
    SuiteClaim,
    SuiteRefuted,
    SuiteReport,
    check_rows,
    read_suite,
    verify_suite,
)

__all__ = [
    "CSV_COLUMNS",
    "FAST_P",
    "Entry",
    "EntryResult",
    "Event",
    "PublishSettings",
    "RowProblem",
    "SuiteClaim",
    "SuiteRefuted",
    "SuiteReport",
    "SuiteSettings",
    "apply_bound",
    "check_rows",
    "dataset_manifest",
    "default_bound",
    "discover",
    "entry_path",
    "kernel_name_of",
    "load_results",
    "merge",
    "parse_size",
    "publish_suite",
    "read_suite",
    "refusal_kind",
    "row_of",
    "run_entry",
    "run_suite",
    "shard_of",
    "suite_body",
    "summarize",
    "to_csv",
    "usable_cpus",
    "verify_suite",
]
