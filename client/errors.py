"""The client's exception tree; each class carries the `ktl` exit code it maps to."""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_VERIFICATION = 1
EXIT_USAGE = 2
EXIT_NETWORK = 3
EXIT_INCONCLUSIVE = 4
EXIT_UNSUPPORTED = 5
"""`ktl reproduce`: a weak claim (its own record says its measurement was disturbed or thin)
that could not be confirmed: do not pay on it (docs/reproducing.md, "Verdicts")."""
EXIT_MEMORY = 6
"""ktl's own process reached its memory bound (RLIMIT_DATA, set by `ktl suite run
--memory-limit` for each step): said, never a kill (docs/kernelbench.md)."""


class ClientError(Exception):
    """Root of every error raised by the client package."""

    exit_code: int = EXIT_USAGE
    kind: str | None = None
    """A typed reason a caller may decide on (printed as `error.kind` by `--json`), where the
    error has one; the message is prose, never read for it."""


class InputError(ClientError):
    """A file, option or argument given to the client is missing or malformed."""

    exit_code = EXIT_USAGE


class MemoryBoundReached(ClientError):
    """ktl's own process could not allocate within its memory bound (RLIMIT_DATA)."""

    exit_code = EXIT_MEMORY


class SuiteInterrupted(ClientError):
    """`ktl suite run` was stopped (Ctrl-C, SIGTERM): the entries finished are kept, those in
    flight are not, and the same command resumes (docs/kernelbench.md)."""

    exit_code = 130

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"interrupted: {done} of {total} entries finished and kept; the "
                         f"{total - done} others were stopped or not started and are not "
                         "recorded: run the same command again to resume")
        self.done, self.total = done, total


class NotInLog(InputError):
    """The log answered that it holds no such entry (HTTP 404): a usage error, exit 2."""

    exit_code = EXIT_USAGE


class VerificationFailed(ClientError):
    """Something that must verify did not: a signature, a proof, a digest or a policy."""

    exit_code = EXIT_VERIFICATION


class LogMisbehaviour(VerificationFailed):
    """The log rolled back or forked: two signed checkpoints that cannot both be honest."""

    exit_code = EXIT_VERIFICATION

    def __init__(self, message: str, evidence_path: Path | None) -> None:
        super().__init__(message)
        self.evidence_path = evidence_path


class NetworkError(ClientError):
    """The log could not be reached, timed out, or answered with an error."""

    exit_code = EXIT_NETWORK


class ServerError(NetworkError):
    """The log answered, but with an error status or a malformed body."""

    exit_code = EXIT_NETWORK

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
