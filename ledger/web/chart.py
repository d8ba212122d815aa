"""Server-side SVG chart: claimed vs reproduced speed-ups with their 95% intervals.

Pure function, no I/O. Every label is escaped (labels come from log entries,
which are attacker-written), every number is checked finite and positive before
it is placed, and the chart uses SVG presentation attributes only (no inline
``style``), so it renders under a strict Content-Security-Policy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import escape

from attest.predicates import VERDICTS as PREDICATE_VERDICTS
from ledger import LedgerError

#: At most this many rows are drawn; the caller is told how many were left out.
MAX_ROWS = 60
#: Longest label drawn (characters); longer ones are cut with an ellipsis.
MAX_LABEL_CHARS = 30
#: Speed-ups outside this range are clamped to the axis (and marked as clamped).
AXIS_MIN = 1.0 / 64.0
AXIS_MAX = 1024.0

VERDICTS = (*PREDICATE_VERDICTS, "")

_ROW_H = 38
_TOP = 34
_BOTTOM = 40
_LEFT = 230
_RIGHT = 44
_CLAIMED = "#2757a6"
_REPRODUCED = "#c4570a"
_REFUTED_BG = "#fde3e1"


class ChartError(LedgerError):
    """A chart row holds a value that cannot be drawn."""


Interval = tuple[float, float]


@dataclass(frozen=True)
class ChartRow:
    """One claim: its label, the claimed speed-up and what a reproduction measured."""

    label: str
    claimed: float
    claimed_ci: Interval | None = None
    reproduced: float | None = None
    reproduced_ci: Interval | None = None
    verdict: str = ""
    #: A second, smaller label line (e.g. which reproduction measured it).
    note: str = ""

    def __post_init__(self) -> None:
        _check_speedup(self.claimed, "claimed speed-up")
        if self.reproduced is not None:
            _check_speedup(self.reproduced, "reproduced speed-up")
        for name, ci in (("claimed_ci", self.claimed_ci), ("reproduced_ci", self.reproduced_ci)):
            if ci is None:
                continue
            if len(ci) != 2:
                raise ChartError(f"{name} must be a [low, high] pair, got {len(ci)} values")
            _check_speedup(ci[0], f"{name} low")
            _check_speedup(ci[1], f"{name} high")
            if ci[0] > ci[1]:
                raise ChartError(f"{name} low {ci[0]} is above high {ci[1]}")
        if self.verdict not in VERDICTS:
            raise ChartError(f"verdict must be one of {VERDICTS!r}, got {self.verdict!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "claimed": self.claimed,
            "claimed_ci": list(self.claimed_ci) if self.claimed_ci else None,
            "reproduced": self.reproduced,
            "reproduced_ci": list(self.reproduced_ci) if self.reproduced_ci else None,
            "verdict": self.verdict,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ChartRow:
        if not isinstance(obj, Mapping):
            raise ChartError("a chart row must be a JSON object")
        unknown = set(obj) - {
            "label", "claimed", "claimed_ci", "reproduced", "reproduced_ci", "verdict", "note",
        }
        if unknown:
            raise ChartError(f"unknown chart row keys: {sorted(unknown)}")
        label = obj.get("label")
        if not isinstance(label, str):
            raise ChartError("chart row label must be a string")
        verdict = obj.get("verdict", "")
        note = obj.get("note", "")
        if not isinstance(verdict, str) or not isinstance(note, str):
            raise ChartError("chart row verdict and note must be strings")
        return cls(
            label=label,
            claimed=_number(obj.get("claimed"), "claimed"),
            claimed_ci=_interval(obj.get("claimed_ci"), "claimed_ci"),
            reproduced=(
                None if obj.get("reproduced") is None
                else _number(obj.get("reproduced"), "reproduced")
            ),
            reproduced_ci=_interval(obj.get("reproduced_ci"), "reproduced_ci"),
            verdict=verdict,
            note=note,
        )


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ChartError(f"{name} must be a number")
    return float(value)


def _interval(value: object, name: str) -> Interval | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ChartError(f"{name} must be a [low, high] pair or null")
    return (_number(value[0], name), _number(value[1], name))


def _check_speedup(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ChartError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ChartError(f"{name} must be a finite number above 0, got {value!r}")


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff\ud800-\udfff]")


def _short(label: str) -> str:
    """Cut a label to length and replace characters XML cannot hold."""
    label = _NOT_XML.sub("\ufffd", label)
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "\u2026"


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x - round(x, 1)) < 1e-9 else f"{x:.3g}"


def _axis_range(rows: Sequence[ChartRow]) -> tuple[float, float]:
    values: list[float] = [1.0]
    for r in rows:
        values.append(r.claimed)
        if r.reproduced is not None:
            values.append(r.reproduced)
        for ci in (r.claimed_ci, r.reproduced_ci):
            if ci is not None:
                values.extend(ci)
    lo = max(min(values), AXIS_MIN)
    hi = min(max(values), AXIS_MAX)
    lo_exp = math.floor(math.log2(lo))
    hi_exp = math.ceil(math.log2(hi))
    if hi_exp - lo_exp < 2:
        lo_exp -= 1
        hi_exp += 1
    return 2.0 ** lo_exp, 2.0 ** hi_exp


_LEGEND = (
    f'<circle cx="{_LEFT + 6}" cy="14" r="5" fill="none" stroke="{_CLAIMED}" stroke-width="2"/>'
    f'<text x="{_LEFT + 16}" y="18" fill="#222">claimed (95% CI)</text>'
    f'<path d="M{_LEFT + 136} 9 l5 5 l-5 5 l-5 -5 z" fill="{_REPRODUCED}"/>'
    f'<text x="{_LEFT + 146}" y="18" fill="#222">reproduced (95% CI)</text>'
)
_MARKS = {"refuted": "\u2717 refuted", "confirmed": "\u2713 confirmed",
          "unsupported": "! unsupported", "inconclusive": "? inconclusive"}


@dataclass(frozen=True)
class _Axis:
    """The x axis: speed-ups `lo`..`hi` on a log2 scale over `plot_w` pixels."""

    lo: float
    hi: float
    plot_w: float

    def x_of(self, v: float) -> float:
        v = min(max(v, self.lo), self.hi)
        log_lo = math.log2(self.lo)
        return _LEFT + (math.log2(v) - log_lo) / (math.log2(self.hi) - log_lo) * self.plot_w


def _grid(axis: _Axis, plot_bottom: int) -> list[str]:
    """A line at each power of two (solid at 1x) and the axis caption."""
    out = []
    exp = round(math.log2(axis.lo))
    while 2.0 ** exp <= axis.hi * 1.0001:
        v = 2.0 ** exp
        x = axis.x_of(v)
        is_one = exp == 0
        dash = "" if is_one else ' stroke-dasharray="3 3"'
        out.append(
            f'<line x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" y2="{plot_bottom}" '
            f'stroke="{"#444" if is_one else "#ddd"}" stroke-width="{1.5 if is_one else 1}"'
            f"{dash}/>"
            f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle" fill="#333">'
            f"{_fmt(v)}\u00d7</text>"
        )
        exp += 1
    out.append(
        f'<text x="{_LEFT + axis.plot_w / 2:.1f}" y="{plot_bottom + 32}" text-anchor="middle" '
        f'fill="#333">speed-up over baseline (log scale; 1\u00d7 = baseline)</text>'
    )
    return out


def _row(axis: _Axis, y0: int, r: ChartRow) -> str:
    """One row from height `y0`: its label and verdict mark, then both series."""
    yc, yr = y0 + 12, y0 + 26
    mark = _MARKS.get(r.verdict, "")
    if r.reproduced is None and not mark:
        mark = "not reproduced yet"
    sub = " \u00b7 ".join(p for p in (_short(r.note), mark) if p)
    refuted = r.verdict == "refuted"
    weight = ' font-weight="600"' if refuted else ""
    out = (
        f'<text x="{_LEFT - 10}" y="{y0 + 15}" text-anchor="end" '
        f'fill="{"#b3261e" if refuted else "#222"}">{escape(_short(r.label))}</text>'
        f'<text x="{_LEFT - 10}" y="{y0 + 30}" text-anchor="end" font-size="11" '
        f'fill="{"#b3261e" if refuted else "#666"}"'
        f"{weight}>{escape(sub)}</text>"
    )
    out += _series(axis.x_of, r.claimed, r.claimed_ci, yc, _CLAIMED, diamond=False)
    if r.reproduced is not None:
        out += _series(axis.x_of, r.reproduced, r.reproduced_ci, yr, _REPRODUCED, diamond=True)
    return out


def render_speedup_chart(
    rows: Sequence[ChartRow], *, width: int = 720, title: str = "Claimed vs reproduced speed-up"
) -> str:
    """Return a self-contained ``<svg>`` element (as text) drawing ``rows``.

    The x axis is the speed-up over the baseline on a log2 scale with a line at
    1x; each row shows the claimed value (blue circle, 95% interval whisker) and
    the reproduced one (orange diamond, interval whisker). Refuted rows get a
    red band and a "refuted" mark. An empty ``rows`` gives a short placeholder.
    """
    if not 320 <= width <= 4000:
        raise ChartError(f"chart width must be 320..4000 px, got {width}")
    shown = list(rows[:MAX_ROWS])
    left_out = len(rows) - len(shown)
    height = _TOP + max(len(shown), 1) * _ROW_H + _BOTTOM + (16 if left_out else 0)
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" preserveAspectRatio="xMinYMin meet" '
        f'font-family="system-ui, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
    ]
    if not shown:
        out.append(
            f'<text x="{width // 2}" y="{_TOP + 14}" text-anchor="middle" fill="#555">'
            "No benchmark claims to draw.</text></svg>"
        )
        return "".join(out)

    axis = _Axis(*_axis_range(shown), width - _LEFT - _RIGHT)
    plot_bottom = _TOP + len(shown) * _ROW_H
    out.append(_LEGEND)
    # Refuted bands first, so markers sit on top.
    out += [f'<rect x="0" y="{_TOP + i * _ROW_H}" width="{width}" height="{_ROW_H}" '
            f'fill="{_REFUTED_BG}"/>' for i, r in enumerate(shown) if r.verdict == "refuted"]
    out += _grid(axis, plot_bottom)
    out += [_row(axis, _TOP + i * _ROW_H, r) for i, r in enumerate(shown)]
    if left_out:
        out.append(
            f'<text x="8" y="{height - 6}" fill="#555">'
            f"{left_out} more claim(s) not drawn; see the table.</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _series(
    x_of: Any, value: float, ci: Interval | None, y: float, colour: str, *, diamond: bool
) -> str:
    parts: list[str] = []
    if ci is not None:
        x1, x2 = x_of(ci[0]), x_of(ci[1])
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y}" x2="{x2:.1f}" y2="{y}" stroke="{colour}" '
            f'stroke-width="2"/>'
            f'<line x1="{x1:.1f}" y1="{y - 4}" x2="{x1:.1f}" y2="{y + 4}" stroke="{colour}" '
            f'stroke-width="2"/>'
            f'<line x1="{x2:.1f}" y1="{y - 4}" x2="{x2:.1f}" y2="{y + 4}" stroke="{colour}" '
            f'stroke-width="2"/>'
        )
    x = x_of(value)
    text_x = max(x, x_of(ci[1]) if ci is not None else x) + 9
    if diamond:
        parts.append(
            f'<path d="M{x:.1f} {y - 6} l6 6 l-6 6 l-6 -6 z" fill="{colour}">'
            f"<title>reproduced {_fmt(value)}\u00d7</title></path>"
        )
    else:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="#fff" stroke="{colour}" stroke-width="2">'
            f"<title>claimed {_fmt(value)}\u00d7</title></circle>"
        )
    parts.append(
        f'<text x="{text_x:.1f}" y="{y + 4}" fill="{colour}" font-size="11">{_fmt(value)}\u00d7</text>'
    )
    return "".join(parts)
