"""attest: claim formats (keys, DSSE envelopes, in-toto statements, predicates, trust policy)."""

from __future__ import annotations


class AttestError(Exception):
    """Root of every error raised by the attest package."""


__all__ = ["AttestError"]
