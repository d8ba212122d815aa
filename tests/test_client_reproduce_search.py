"""Issue 42 item 9: whether `ktl reproduce`'s claim search is proven complete is decided by
one reader of the checkpoint's index line (`ledger.vindex.committed_root`, through
`client.vindex.verified_lookup`), as `ktl search` and the kernel page decide it: a log whose
checkpoint carries the line is proven complete, and "commits to no index" is said only where
the signed checkpoint was read and carries none."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from client_server import Ktl, kernel_folder, running_log, small_results

from attest.keys import generate_private_key, save_private_key
from client.reproduce import ClaimSearch, gather
from client.session import connect
from client.state import TrustedState


class _NoLookup:
    """A log API without the index lookup (an older client's), everything else passed on."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def __getattr__(self, name: str) -> Any:
        if name == "index_lookup":
            raise AttributeError(name)
        return getattr(self._log, name)


def test_the_search_is_proven_complete_where_ktl_search_proves_it(tmp_path: Path) -> None:
    save_private_key(tmp_path / "k.key", generate_private_key())
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        pub = ktl.json("publish", str(kernel_folder(tmp_path)), "--key", str(tmp_path / "k.key"),
                       "--results", str(small_results(tmp_path)), "--log", url)
        searched = ktl("search", "--digest", pub["subject_sha256"], "--log", url)
        assert searched.exit_code == 0 and "proven complete" in " ".join(searched.stdout.split())
        key = ktl.json("log-info", "--log", url)["verifier_key"]
        sess = connect(url, TrustedState(tmp_path / "home"), key)
        try:
            got = gather(sess, 0, tmp_path / "work").search
        finally:
            sess.close()
        assert got.proven_up_to == 3 and got.unproven is None, got
        assert "proven complete up to index 3" in got.summary()
        assert "commits to no index" not in got.summary()
        sess = connect(url, TrustedState(tmp_path / "home"), key)
        sess = dataclasses.replace(sess, log=_NoLookup(sess.log))
        try:
            other = gather(sess, 0, tmp_path / "work2").search
        finally:
            sess.close()
    assert other.unproven == "no_lookup" and "offers no index lookup" in other.summary()
    assert "commits to no index" not in other.summary()


def test_the_summary_says_commits_to_no_index_only_from_the_checkpoint() -> None:
    said = ClaimSearch(unproven="no_index").summary()
    assert "signed checkpoint commits to no index" in said
    assert ClaimSearch.from_json(ClaimSearch(unproven="no_index").to_json()).unproven == \
        "no_index"


def test_one_function_reads_the_index_line_and_every_caller_uses_it() -> None:
    """Issue 42 item 6: `ledger.vindex.commitment_lines` is the only code that picks the
    index line out of a checkpoint's extensions; `committed_root` (search, reproduce, the
    kernel page) and the trust store's two-roots check both go through it."""
    import re

    root = Path(__file__).resolve().parent.parent
    reader = root / "ledger" / "vindex" / "_commit.py"
    picks = re.compile(r"""["']ktl/vindex/["']|\.extensions\b(?!\[)""")
    found = [f"{p.relative_to(root)}:{n}" for pkg in ("attest", "ledger", "client", "verifier")
             for p in sorted((root / pkg).rglob("*.py")) if p != reader
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if picks.search(line) and "app.extensions" not in line
             and "current_app.extensions" not in line
             and not p.match("ledger/tlog/checkpoint.py")]  # where extensions are parsed
    assert found == [], found
    text = reader.read_text(encoding="utf-8")
    assert text.count(".extensions") == 1 and "commitment_lines(checkpoint)" in text
    trust = (root / "client" / "trust.py").read_text(encoding="utf-8")
    assert "commitment_lines(" in trust
