"""checks: `ktl check`, the verification suite, into a `verification/v1` body.

Holds the suite (`_suite`: build, run, judge, report), its plan of cases, shapes,
inputs and output prefills (`_plan`), the runner of cases in the worker with
crash/hang resume (`_run`), the judge of dumped arenas against the float64
reference (`_judge`), budgets, typed rows and the report (`_report`), the sanitizer
rows (`_sanitizers`) and the huge-index row (`_overflow`); for a torch module, the check
(`_torch_suite`) that fills what it gathered (`_torch_gathered`, the bottom) and the rows
judged from it (`_torch_rows`).

May import: the pure model, `sandbox`, `worker` and `runtimes`. Not `benchmark` or
`reproduce`.
"""

from __future__ import annotations

from verifier.checks._suite import BUDGETS, OUTCOMES, CheckReport, check

__all__ = ["BUDGETS", "OUTCOMES", "CheckReport", "check"]
