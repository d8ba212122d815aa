"""`ktl check`'s `audit.library` row: the static audit of the built library
(`verifier.runtimes.audit_library`) as a typed row, declared findings shown with their
reasons, undeclared ones a fail."""

from __future__ import annotations

from attest.predicates import Check
from attest.text import plural
from verifier.checks._report import check_row, make_fault
from verifier.kernel import KernelSpec
from verifier.runtimes import (
    ALLOWED_GROUPS,
    CUDA_GROUPS,
    Artifact,
    Audit,
    AuditError,
    audit_library,
)

__all__ = ["audit_row"]


def audit_row(artifact: Artifact, spec: KernelSpec) -> tuple[Check, Audit | None]:
    """The row, and the audit (None where the library was not audited)."""
    name = "audit.library"
    if artifact.gpu and artifact.audit_path is None:
        return check_row(name, "skip", "not audited: a cuda library links the CUDA runtime "
                           "statically, whose own imports (dlopen, getenv, file reads) would "
                           "hide the kernel's"), None
    groups = CUDA_GROUPS if artifact.gpu else ALLOWED_GROUPS
    try:  # cuda: the kernel's own sources against the shared runtime (`Artifact.audit_path`)
        audit = audit_library(artifact.audit_path or artifact.path, "-fopenmp" in spec.flags,
                              dict(spec.audit_allow), cuda=artifact.gpu)
    except AuditError as exc:
        return check_row(name, "error", f"the built library cannot be audited: {exc}", {}, {},
                           None), None
    inputs = {"flags": list(spec.flags)}
    metrics = {"imports": float(len(audit.imports)), "findings": float(len(audit.findings)),
               "undeclared": float(len(audit.undeclared)),
               "disassembled": 1.0 if audit.disassembled else 0.0}
    for f in audit.undeclared:  # per category: what a program reads (the detail is for people)
        key = f"undeclared_{f.category}"
        metrics[key] = metrics.get(key, 0.0) + 1.0
    declared = [f"{f} declared: {f.declared}" for f in audit.findings if f.declared is not None]
    shown = "; ".join(declared)
    if audit.undeclared:
        found = audit.undeclared
        return check_row(
            name, "fail",
            f"the built library {', '.join(str(f) for f in found[:8])}"
            + (f" and {len(found) - 8} more" if len(found) > 8 else "")
            + f": outside what a kernel of runtime {spec.runtime} needs ({groups}); a "
            "kernel that senses its surroundings can behave only inside the harness. Declare "
            "each with its reason in kernel.toml [audit.allow] if it is needed"
            + (f"; {shown}" if shown else ""), inputs, metrics,
            make_fault("forbidden_import")), audit
    code = "" if audit.disassembled else "; instructions not read (objdump unavailable or failed)"
    return check_row(
        name, "pass",
        f"{plural(len(audit.imports), 'import')} all within {groups}; no host path or "
        f"sandbox tell among its strings; no system-call or timer instruction{code}"
        + (f"; {shown}" if shown else ""), inputs, metrics), audit
