"""The verifier package's exception tree (kept apart so every submodule can import it)."""

from __future__ import annotations


class VerifierError(Exception):
    """Root of every error raised by the verifier package."""


class KernelSpecError(VerifierError):
    """A kernel folder or its `kernel.toml` is malformed; the message names the field."""


class UnknownOpError(KernelSpecError):
    """`kernel.toml` names an op this verifier's catalogue does not hold: not a defect of the
    kernel, a limit of this verifier (a newer catalogue may know it)."""

    def __init__(self, op: str, catalogue_version: int, known: list[str]) -> None:
        self.op = op
        self.catalogue_version = catalogue_version
        super().__init__(f"op: {op!r} is not known to this verifier (catalogue version "
                         f"{catalogue_version}; it knows {', '.join(known)}); an op the "
                         "catalogue lacks can be defined by a PyTorch module: op = 'torch', "
                         "runtime = 'torch' (see `ktl import kernelbench`)")


class ArchiveError(VerifierError):
    """A kernel archive is malformed, unsafe (path traversal, links) or over a size cap."""


class BuildError(VerifierError):
    """The kernel could not be compiled; the message carries the compiler's diagnostics."""


class RuntimeUnavailableError(VerifierError):
    """The kernel's runtime (e.g. `cuda`, `triton`) cannot run on this machine."""


class SandboxError(VerifierError):
    """The sandbox itself could not start a child (not the kernel's fault)."""


class ReproduceError(VerifierError):
    """A claimed predicate cannot be compared (malformed body, unknown predicate type)."""
