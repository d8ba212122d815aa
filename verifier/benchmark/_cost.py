"""How a bench run accounted and confined the kernel's cost (benchmark/v1's method fields).

The kernel's cost is everything its process tree consumes (`verifier.worker._account`). A
run records how that was read (`cpu_accounting`), how the tree was held to its CPUs
(`cpu_pinning`) and what bounded its memory (`memory_limit`), from what the child itself
reported was in force (`ChildResult.layers`), never assumed. Accounting is complete with
the run's cgroup, or with /proc when seccomp denied what /proc cannot see (CLONE_VM
processes, affinity changes); a run whose accounting is incomplete is not trusted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from verifier.sandbox import ChildResult
from verifier.worker import AccountingKind, NativeWorker

__all__ = ["CostRecord", "Pinning", "cost_record"]

Pinning = Literal["cpuset", "affinity", "none"]
MemoryLimit = Literal["cgroup", "address-space"]


@dataclass(frozen=True)
class CostRecord:
    cpu_accounting: AccountingKind
    cpu_pinning: Pinning
    memory_limit: MemoryLimit
    complete: bool
    """Every task's CPU was counted (or what could not be was denied)."""

    def method_fields(self) -> dict[str, str]:
        return {"cpu_accounting": self.cpu_accounting, "cpu_pinning": self.cpu_pinning,
                "memory_limit": self.memory_limit}

    def to_json(self) -> dict[str, Any]:
        return {**self.method_fields(), "complete": self.complete}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CostRecord:
        return cls(obj["cpu_accounting"], obj["cpu_pinning"], obj["memory_limit"],
                   bool(obj["complete"]))

    def describe(self) -> str:
        how = ("its run's cgroup (every task ever in it)" if self.cpu_accounting == "cgroup" else
               "/proc of every task of its tree" + (
                   ", CLONE_VM processes and affinity changes denied by seccomp"
                   if self.complete else " (INCOMPLETE: CLONE_VM processes were not denied)"))
        pin = {"cpuset": "held to its CPU by a cpuset", "affinity":
               "held to its CPU by the inherited affinity (changes refused)",
               "none": "not pinned"}[self.cpu_pinning]
        mem = ("memory limited by the cgroup (shared memory and private-folder tmpfs included)"
               if self.memory_limit == "cgroup" else "memory limited by RLIMIT_AS only")
        return f"kernel's CPU read from {how}; {pin}; {mem}"


def cost_record(worker: NativeWorker, result: ChildResult | None) -> CostRecord:
    """What held for `worker`'s run, from the layers its child reported."""
    layers = result.layers if result is not None else None
    grouped = worker.cgroup is not None and layers is not None and layers.cgroup
    denied = layers is not None and layers.unaccountable_denied
    if grouped and worker.cgroup is not None:
        pinning: Pinning = "cpuset" if len(worker.cgroup.cpus) == 1 else "none"
    else:
        pinning = "affinity" if denied and len(os.sched_getaffinity(0)) == 1 else "none"
    return CostRecord("cgroup" if grouped else "process-tree", pinning,
                      "cgroup" if grouped else "address-space", bool(grouped or denied))
