"""Text a sandboxed child chose, as it may enter a report: a bounded, typed summary.

A signed statement is public and permanent, and whatever a kernel's process writes (an
exception's message, a state entry's name, a line of stderr) is the kernel's choice: round 4
named its buffers after the host's MAC address and launcher paths, and the report carried
them. What reaches a row is therefore a kind the verifier knows (a builtin exception class,
a count) and, for the text itself, only its length and a digest: enough to tell two runs'
texts apart, and nothing the kernel can use to publish what it read. Pure.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterable

__all__ = ["MAX_SUMMARISED", "OWN_STDERR_LINES", "exception_summary", "names_summary",
           "stderr_summary", "text_summary"]

MAX_SUMMARISED = 1 << 20
"""Most bytes of one text digested (a longer one is summarised by its first MiB and its length)."""
_KNOWN_EXCEPTIONS = frozenset(
    name for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name),
                                                                 BaseException))
"""Exception classes a report may name: Python's own (a kernel's class names are its words)."""


def text_summary(text: str | bytes, what: str = "text") -> str:
    """'<what> of N bytes, sha256 0123456789abcdef': never the text itself."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    digest = hashlib.sha256(raw[:MAX_SUMMARISED]).hexdigest()[:16]
    return f"{what} of {len(raw)} bytes, sha256 {digest}"


def exception_summary(text: str) -> str:
    """'Type: message' (as a child reports a raised exception) as 'Type (message of N bytes,
    sha256 ...)'; a class that is not Python's own is 'an exception of its own class'."""
    head, sep, message = text.partition(":")
    name = head.strip()
    if not sep or name not in _KNOWN_EXCEPTIONS:
        return f"an exception of its own class ({text_summary(text, 'text')})"
    return f"{name} ({text_summary(message.strip(), 'message')})"


def names_summary(names: Iterable[str], what: str = "names") -> str:
    """A list of chosen names as their count and one digest of them all."""
    listed = list(names)
    joined = "\0".join(listed).encode("utf-8", "replace")
    digest = hashlib.sha256(joined[:MAX_SUMMARISED]).hexdigest()[:16]
    return f"{len(listed)} {what}, sha256 {digest}"


OWN_STDERR_LINES = ("cannot load the kernel library", "the library exports no symbol")
"""How lines the native worker itself writes begin (`verifier/worker/_native_worker.c`): a
report may name which of ours it was; what follows (dlerror's text, a symbol) is summarised."""


def stderr_summary(stderr: str) -> str:
    """A child's stderr as a report may carry it: its length and digest, and where its last
    line is one of the worker's own (`OWN_STDERR_LINES`), which one. Never the text: a kernel
    printing the host's names to stderr gets them into no row."""
    whole = text_summary(stderr, "stderr")
    lines = stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    own = next((p for p in OWN_STDERR_LINES if last.startswith(p)), None)
    return whole if own is None else (f"{whole}; its last line begins as the worker's own "
                                      f"'{own}' does ({text_summary(last, 'line')})")
