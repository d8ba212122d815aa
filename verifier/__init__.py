"""verifier: runs kernels in a sandbox and checks their claims."""

from __future__ import annotations


class VerifierError(Exception):
    """Root of every error raised by the verifier package."""


__all__ = ["VerifierError"]
