"""Strict query and path parameter parsing (absurd values get a 400 naming the parameter)."""

from __future__ import annotations

import re

from flask import request

from attest import HEX64_PATTERN
from ledger.server._errors import ApiError

_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX64 = re.compile(HEX64_PATTERN)
MAX_INT = (1 << 63) - 1


def parse_int(text: str, name: str, lo: int = 0, hi: int = MAX_INT) -> int:
    if not _DIGITS.fullmatch(text):
        raise ApiError(
            400, "invalid_parameter",
            f"{name} must be a decimal integer without sign or leading zeros, got {text[:40]!r}",
        )
    value = int(text)
    if not lo <= value <= hi:
        raise ApiError(400, "invalid_parameter", f"{name} must be between {lo} and {hi}, got {value}")
    return value


def int_arg(name: str, default: int | None = None, lo: int = 0, hi: int = MAX_INT) -> int:
    raw = request.args.get(name)
    if raw is None:
        if default is None:
            raise ApiError(400, "missing_parameter", f"query parameter {name} is required")
        return default
    return parse_int(raw, name, lo, hi)


def hex64(text: str, name: str) -> str:
    if not _HEX64.fullmatch(text):
        raise ApiError(400, "invalid_parameter", f"{name} must be 64 lowercase hex characters")
    return text


def only_args(*names: str) -> None:
    """Refuse query parameters the endpoint does not take (the OpenAPI document says which)."""
    unknown = sorted(set(request.args) - set(names))
    if unknown:
        raise ApiError(
            400, "invalid_parameter",
            f"unknown query parameter {unknown[0][:40]!r}; this endpoint takes {', '.join(names)}",
        )
