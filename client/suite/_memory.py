"""The bound on ktl's own memory during `ktl suite run`: RLIMIT_DATA (heap and private
mappings) of the suite's process, inherited by every `ktl` step it starts (import, check,
bench) and their children. Reaching it is said (`MemoryBoundReached`, exit 6, the entry
refused with the bound in numbers), never a kill. The default is 3/4 of this machine's
physical memory; the bound is written to run.json and stated in a published suite.
"""

from __future__ import annotations

import os
import re
import resource

from client.errors import InputError

__all__ = ["DEFAULT_SHARE", "MIN_BOUND", "apply_bound", "default_bound", "parse_size"]

DEFAULT_SHARE = 0.75
MIN_BOUND = 64 << 20
"""Below this not even the Python interpreter of a step starts."""
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def default_bound() -> int:
    """3/4 of this machine's physical memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * DEFAULT_SHARE)


def parse_size(text: str) -> int:
    """'auto' (`default_bound`) or a size such as 8G, 512M, 1073741824."""
    if text.strip().lower() == "auto":
        return default_bound()
    m = re.fullmatch(r"\s*(\d{1,15})\s*([KMGT]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise InputError(f"--memory-limit {text[:40]!r}: expected auto or a size such as 8G")
    size = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if size < MIN_BOUND:
        raise InputError(f"--memory-limit {text[:40]!r}: at least {MIN_BOUND >> 20} MiB")
    return size


def apply_bound(limit: int) -> int:
    """Bound this process's (and its future children's) data to `limit` bytes; returns the
    bound in force (never above the hard limit already set)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    bound = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (bound, hard))
    return bound
