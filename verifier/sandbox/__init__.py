"""sandbox: one confined child process per run, and what was in force.

Holds the child's set-up (`_confine`: namespaces, Landlock, seccomp-bpf, rlimits,
planned in Python and applied before exec by the native launcher `_launcher.c`, which
`_launcher` builds with the system cc, as it builds the native worker),
the per-run cgroup (`_cgroup`: CPU accounting, cpuset, memory and task limits),
the watch on denied system calls (`_violations`), byte-capped output pipes
(`_output`), the record of the layers in force (`_layers`) and the runner
(`_process`: limits, timeouts, the private folder, the child's result) and scratch folders removed without
recursion (`_scratch`).

May import: the pure model (`verifier.errors`, `verifier.ops`, `verifier.kernel`,
`verifier.gpu`) and `attest`. Nothing above it (worker, runtimes, checks,
benchmark, reproduce).
"""

from __future__ import annotations

from verifier.sandbox._cgroup import CgroupUnavailable, RunCgroup, cgroup_reason
from verifier.sandbox._landlock import abi_version as landlock_abi
from verifier.sandbox._launcher import build_program
from verifier.sandbox._layers import NO_LAYERS, SandboxLayers
from verifier.sandbox._process import (
    SETUP_FAILED,
    Accounting,
    ChildResult,
    Limits,
    base_env,
    filesystem_confinement,
    memory_limit,
    probe_layers,
    run_sandboxed,
    sandbox_detail,
    sandbox_metrics,
)
from verifier.sandbox._scratch import remove_tree, scratch_dir
from verifier.sandbox._summary import (
    exception_summary,
    names_summary,
    stderr_summary,
    text_summary,
)

__all__ = ["NO_LAYERS", "SETUP_FAILED", "Accounting", "CgroupUnavailable", "ChildResult", "Limits",
           "RunCgroup", "SandboxLayers", "base_env", "build_program", "cgroup_reason",
           "exception_summary", "filesystem_confinement", "landlock_abi", "memory_limit",
           "names_summary", "probe_layers", "remove_tree", "run_sandboxed", "sandbox_detail",
           "sandbox_metrics", "scratch_dir", "stderr_summary", "text_summary"]
