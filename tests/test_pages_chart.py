"""The server-side SVG chart: escaping, validation, geometry, JSON round trip."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.web import ChartError, ChartRow, render_speedup_chart
from ledger.web.chart import MAX_ROWS

SVG = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_labels_are_escaped_and_svg_is_well_formed() -> None:
    evil = '<script>alert(1)</script>&"\''
    svg = render_speedup_chart([ChartRow(evil, 2.0, (1.5, 2.5), 1.9, (1.7, 2.1), "confirmed")])
    assert "<script>" not in svg
    root = _parse(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert any(evil[:20] in t for t in texts)
    assert not list(root.iter(f"{SVG}script"))
    assert "style=" not in svg  # presentation attributes only: strict CSP allows them


def test_refuted_row_gets_a_band_and_mark() -> None:
    rows = [
        ChartRow("honest", 2.0, (1.8, 2.2), 2.1, (1.9, 2.3), "confirmed"),
        ChartRow("inflated", 6.0, (5.4, 6.6), 2.0, (1.8, 2.2), "refuted"),
    ]
    root = _parse(render_speedup_chart(rows))
    bands = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#fde3e1"]
    assert len(bands) == 1
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    # Each row: the label line, then the verdict line under it.
    at = texts.index("inflated")
    assert texts[at + 1] == "\u2717 refuted"
    assert texts[texts.index("honest") + 1] == "\u2713 confirmed"


def test_markers_are_ordered_on_a_log_axis() -> None:
    root = _parse(render_speedup_chart([ChartRow("a", 4.0, None, 1.0, None, "refuted")]))
    circles = list(root.iter(f"{SVG}circle"))
    claimed_x = float(circles[-1].get("cx", "0"))
    diamond = next(p for p in root.iter(f"{SVG}path") if p.find(f"{SVG}title") is not None)
    m = re.match(r"M([0-9.]+) ", diamond.get("d", ""))
    assert m is not None
    reproduced_x = float(m.group(1))
    one_x = next(ln for ln in root.iter(f"{SVG}line") if ln.get("stroke") == "#444")
    # log scale: 4x is two doublings right of 1x; 1x sits on the baseline line.
    assert reproduced_x == pytest.approx(float(one_x.get("x1", "0")), abs=0.2)
    assert claimed_x > reproduced_x


def test_empty_chart_is_a_placeholder() -> None:
    svg = render_speedup_chart([])
    assert "No benchmark claims" in svg
    _parse(svg)


def test_too_many_rows_are_cut_with_a_note() -> None:
    rows = [ChartRow(f"r{i}", 1.0 + i / 10) for i in range(MAX_ROWS + 5)]
    svg = render_speedup_chart(rows)
    assert "5 more claim(s) not drawn" in svg
    assert "r64" not in svg


@pytest.mark.parametrize(
    "kwargs",
    [
        {"claimed": 0.0},
        {"claimed": -1.0},
        {"claimed": math.nan},
        {"claimed": math.inf},
        {"claimed": 1.0, "claimed_ci": (2.0, 1.0)},
        {"claimed": 1.0, "reproduced": math.nan},
        {"claimed": 1.0, "reproduced_ci": (0.0, 1.0)},
        {"claimed": 1.0, "verdict": "<b>maybe</b>"},
    ],
)
def test_bad_rows_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ChartError):
        ChartRow("x", **kwargs)  # type: ignore[arg-type]


def test_bad_width_is_rejected() -> None:
    with pytest.raises(ChartError, match="width"):
        render_speedup_chart([], width=10)


def test_from_json_rejects_malformed() -> None:
    with pytest.raises(ChartError):
        ChartRow.from_json({"label": "x", "claimed": "2"})
    with pytest.raises(ChartError):
        ChartRow.from_json({"label": "x", "claimed": 2.0, "extra": 1})
    with pytest.raises(ChartError):
        ChartRow.from_json({"label": "x", "claimed": 2.0, "claimed_ci": [1.0]})


_pos = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def _rows(draw: st.DrawFn) -> ChartRow:
    def ci() -> tuple[float, float] | None:
        if not draw(st.booleans()):
            return None
        a, b = sorted((draw(_pos), draw(_pos)))
        return (a, b)

    return ChartRow(
        label=draw(st.text(st.characters(codec="utf-8"), max_size=80)),
        claimed=draw(_pos),
        claimed_ci=ci(),
        reproduced=draw(st.none() | _pos),
        reproduced_ci=ci(),
        verdict=draw(st.sampled_from(["confirmed", "refuted", "inconclusive", ""])),
    )


@given(st.lists(_rows(), max_size=8))
def test_any_rows_render_to_well_formed_svg(rows: list[ChartRow]) -> None:
    for row in rows:
        assert ChartRow.from_json(row.to_json()) == row
    svg = render_speedup_chart(rows)
    # Whatever a label holds, the SVG parses and holds no elements beyond ours.
    root = _parse(svg)
    tags = {el.tag.removeprefix(SVG) for el in root.iter()}
    assert tags <= {"svg", "title", "text", "line", "rect", "circle", "path"}
