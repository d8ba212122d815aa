"""`ktl suite`: a KernelBench-layout folder of problems and their solutions, run whole.

`run_suite(settings, on_event)` imports, checks and benchmarks every entry (each step a
sandboxed `ktl` subprocess pinned to its job's CPU), resumably; `summarize` gives
KernelBench's figures (correct %, fast_p) beside ours (trusted, refused and why,
findings); `merge` joins shards run on other machines (`--shard K/N`).

Holds `_entries` (the bottom: settings, entries, results, discovery), `_run` (the
runner) and `_summary` (figures, CSV, merge). May import `client.errors` only; the command is
`client.cli.suite`.
"""

from __future__ import annotations

from client.suite._entries import Entry, EntryResult, SuiteSettings, discover, shard_of
from client.suite._run import Event, entry_path, load_results, run_entry, run_suite, usable_cpus
from client.suite._summary import CSV_COLUMNS, FAST_P, merge, summarize, to_csv

__all__ = ["CSV_COLUMNS", "FAST_P", "Entry", "EntryResult", "Event", "SuiteSettings",
           "discover", "entry_path", "load_results", "merge", "run_entry", "run_suite",
           "shard_of", "summarize", "to_csv", "usable_cpus"]
