"""Database URLs: checked before use, and never shown with their password."""

from __future__ import annotations

import re

from ledger.storage._types import StorageError

_URL = re.compile(r"^postgres(ql)?://[^\s]*$")
#: Longest database URL accepted.
MAX_URL = 2048


def check_database_url(url: object) -> str:
    """A ``postgresql://`` URL (libpq form), or `StorageError` saying what is wrong."""
    if not isinstance(url, str) or len(url) > MAX_URL or not _URL.fullmatch(url):
        raise StorageError(
            "the database must be a postgresql:// URL, e.g. "
            "postgresql://user@host/dbname or postgresql:///dbname?host=/run/postgresql"
        )
    return url


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages and logs)."""
    url = re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)
