"""`ktl ops`: the op catalogue with C signatures, dimension order, constants and tolerances."""

from __future__ import annotations

from pathlib import Path

from client_server import Ktl

from client.cli.ops import markdown_table
from verifier.ops import OPS, RMSNORM_EPS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "checks.md"


def test_ktl_ops_lists_every_op_with_its_abi(tmp_path: Path) -> None:
    ktl = Ktl(tmp_path)
    got = {row["op"]: row for row in ktl.json("ops")["ops"]}
    assert list(got) == list(OPS)
    rms = got["rmsnorm"]
    assert rms["signature"] == ("void f(const float* X, const float* W, float* Y, int64_t R, "
                                "int64_t C)")
    assert rms["dims"] == ["R", "C"] and rms["constants"] == {"eps": RMSNORM_EPS}
    assert rms["operands"] == ["X[R,C]", "W[C]", "Y[R,C]"]
    assert all(row["tolerance"] for row in got.values())
    table = ktl("ops")
    assert table.exit_code == 0 and "int64_t M, int64_t N, int64_t K)" in table.stdout


def test_the_docs_op_table_is_the_catalogue(tmp_path: Path) -> None:
    res = Ktl(tmp_path)("ops", "--markdown")
    assert res.exit_code == 0 and res.stdout == markdown_table()
    assert markdown_table() in PAGE.read_text(encoding="utf-8"), \
        "docs/checks.md's op table is stale: paste `ktl ops --markdown` into it"
