"""The attest package's exception tree (kept apart so every submodule can import it)."""

from __future__ import annotations


class AttestError(Exception):
    """Root of every error raised by the attest package."""


class KeyFileError(AttestError):
    """A key could not be generated, saved or loaded (wrong type, passphrase, file exists)."""


class EnvelopeError(AttestError):
    """A DSSE envelope is malformed (bad base64, missing field, over a size or count cap)."""


class SignatureError(AttestError):
    """Signatures did not verify, or fewer than the required threshold did."""


class ValidationError(AttestError):
    """A statement or predicate breaks its schema; `path` names the offending field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class EntryError(AttestError):
    """A log entry is malformed, not canonical, or inconsistent with its keys."""


class EntryKeysError(EntryError):
    """A log entry's keys and signatures do not belong together: a key that does not parse
    or is not its keyid's, a signature by a key not given, a key used twice or not at all."""


class NonCanonicalEntryError(EntryError):
    """Log entry bytes are valid JSON but not its RFC 8785 canonical form (or have none)."""


class EntryTooLargeError(EntryError):
    """A log entry exceeds MAX_ENTRY_BYTES (the tlog-tiles entry bundle limit)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"log entry is {size} bytes; the limit is {limit} bytes (one tlog-tiles bundle "
            "entry): move large data (raw samples, sources) into a blob referenced by sha256"
        )
        self.size = size
        self.limit = limit


class PolicyError(AttestError):
    """A trust policy file is malformed or names a key that cannot be loaded."""
