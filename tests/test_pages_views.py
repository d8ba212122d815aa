"""The explorer pages through Flask's test client on the real app (JSON API + pages)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from test_pages_helpers import (
    ISSUE_NAME,
    NAME,
    ORIGIN,
    XSS,
    Populated,
    benchmark_body,
    close_app,
    digest_of,
    make_app,
    populate,
    signed,
    submit,
)

from attest import BENCHMARK_V1


@pytest.fixture(scope="module")
def app() -> Iterator[Flask]:
    app = make_app()
    yield app
    close_app(app)


@pytest.fixture(scope="module")
def log(app: Flask) -> Populated:
    return populate(app.test_client())


@pytest.fixture
def client(app: Flask, log: Populated) -> FlaskClient:
    del log
    return app.test_client()


def _text(body: str) -> str:
    """Visible text, roughly: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_home_shows_the_log_and_recent_entries(client: FlaskClient, log: Populated) -> None:
    resp = client.get("/")
    assert resp.status_code == 200
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    body = resp.get_data(as_text=True)
    text = _text(body)
    size = log.fillers[-1] + 1
    assert ORIGIN in text
    assert f"Tree size {size} entries" in " ".join(text.split())
    assert "✓ verified" in text
    assert client.get("/api/v1/log").get_json()["verifier_key"] in text
    assert f'href="/entries/{log.fillers[-1]}"' in body
    assert "Witness cosignatures none" in " ".join(text.split())


def test_entry_page_decodes_and_proves(client: FlaskClient, log: Populated) -> None:
    resp = client.get(f"/entries/{log.benchmark}")
    assert resp.status_code == 200
    body = resp.get_data(as_text=True)
    text = " ".join(_text(body).split())
    assert f"Entry #{log.benchmark}" in text
    assert NAME in text and BENCHMARK_V1 in text
    assert "✓ signatures and predicate verify" in text
    assert f"✓ verified : entry #{log.benchmark} is in the tree of size" in text
    assert log.publisher_keyid[:16] in text
    assert f'href="/kernels/{log.subject}"' in body
    # The raw canonical entry is one click away and is exactly the logged bytes.
    raw = re.search(r'<pre class="raw">(.*?)</pre>', body, re.S)
    assert raw is not None
    api = client.get(f"/api/v1/entries/{log.benchmark}").get_json()
    assert html.unescape(raw.group(1)).encode() == base64.b64decode(api["entry_b64"])
    # Links to the subject's other entries.
    for other in (log.kernel, log.verification, log.reproduction):
        assert f'href="/entries/{other}"' in body


def test_hostile_fields_are_escaped(client: FlaskClient, log: Populated) -> None:
    for url in (f"/entries/{log.hostile_kernel}", f"/entries/{log.hostile_benchmark}",
                f"/kernels/{log.hostile_subject}"):
        body = client.get(url).get_data(as_text=True)
        assert "<script>alert" not in body and "<img src=x" not in body, url
        assert XSS in html.unescape(body), url  # shown, as text
        assert "<script" not in body.lower(), url


def test_kernel_page_marks_the_refuted_claim(client: FlaskClient, log: Populated) -> None:
    resp = client.get(f"/kernels/{log.subject}")
    assert resp.status_code == 200
    body = resp.get_data(as_text=True)
    text = " ".join(_text(body).split())
    assert "1 claim refuted" in text
    assert "<svg" in body and "✗ refuted" in text
    assert body.count('<tr class="refuted">') >= 1
    assert "not reproduced yet" in text  # the filler benchmarks
    assert f'href="/entries/{log.reproduction}"' in body
    assert "matmul_blocked" in text  # provenance


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("/entries/999999", 404, "has no entry 999999"),
        ("/entries/abc", 404, "entries are numbered"),
        ("/entries/-1", 404, "entries are numbered"),
        ("/kernels/" + "0" * 64, 404, "No entry in the log"),
        ("/kernels/xyz", 400, "64 lowercase hex"),
        ("/search?q=a&limit=0", 400, "'limit' must be from 1 to 100"),
        ("/search?q=a&limit=ten", 400, "'limit' must be a whole number"),
        ("/search?q=a&cursor=-3", 400, "'cursor' must be a whole number"),
        ("/search?q=a&field=title", 400, "'field' must be one of"),
        ("/search?q=abc&field=keyid", 400, "64 hex characters"),
        ("/search?q=" + "a" * 300, 400, "too long"),
    ],
)
def test_bad_requests_get_clear_html_errors(
    client: FlaskClient, url: str, status: int, says: str
) -> None:
    resp = client.get(url)
    assert resp.status_code == status
    assert resp.mimetype == "text/html"
    assert says in html.unescape(resp.get_data(as_text=True))
    assert "Content-Security-Policy" in resp.headers


def _indices(body: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td><a href="/entries/(\d+)">', body)]


def test_search_by_each_field_with_pagination(client: FlaskClient, log: Populated) -> None:
    by_name = client.get(f"/search?q={NAME}&limit=3").get_data(as_text=True)
    first = _indices(by_name)
    assert first == [log.kernel, log.benchmark, log.verification]
    nxt = re.search(r'rel="next" href="([^"]+)"', by_name)
    assert nxt is not None
    second = _indices(client.get(html.unescape(nxt.group(1))).get_data(as_text=True))
    assert second and min(second) > max(first)

    by_digest = _indices(client.get(f"/search?q={log.hostile_subject}").get_data(as_text=True))
    assert by_digest == [log.hostile_kernel, log.hostile_benchmark]
    by_key = _indices(client.get(f"/search?q={log.publisher_keyid}").get_data(as_text=True))
    assert log.kernel in by_key and log.reproduction not in by_key  # auto: digest, then key id
    by_kind = _indices(client.get("/search?q=verification").get_data(as_text=True))
    assert by_kind == [log.verification]
    by_uri = _indices(client.get(f"/search?field=predicate_type&q={BENCHMARK_V1}&limit=100")
                      .get_data(as_text=True))
    assert log.benchmark in by_uri and log.kernel not in by_uri
    none = client.get("/search?q=nobody/nothing").get_data(as_text=True)
    assert "No entries match." in none


def test_search_number_goes_to_the_entry(client: FlaskClient, log: Populated) -> None:
    resp = client.get(f"/search?q={log.kernel}")
    assert resp.status_code == 302 and resp.headers["Location"].endswith(f"/entries/{log.kernel}")


def test_empty_log_home() -> None:
    app = make_app()
    try:
        body = app.test_client().get("/").get_data(as_text=True)
        assert "The log is empty" in body or "Tree size" in body
    finally:
        close_app(app)


def test_shapes_are_shown_in_the_ops_dimension_order() -> None:
    """Canonical JSON sorts softmax's dimensions C, R; both pages show R, then C."""
    app = make_app()
    try:
        client = app.test_client()
        subject = digest_of("kernel-softmax")
        body = benchmark_body([2.0], op="softmax", shapes=[{"R": 512, "C": 1024}])
        index = submit(client, signed("acme/softmax", subject, BENCHMARK_V1, body))
        entry = " ".join(_text(client.get(f"/entries/{index}").get_data(as_text=True)).split())
        assert "R=512, C=1024" in entry and "C=1024, R=512" not in entry
        kernel = " ".join(_text(client.get(f"/kernels/{subject}").get_data(as_text=True)).split())
        assert "R=512,C=1024" in kernel and "C=1024,R=512" not in kernel
    finally:
        close_app(app)


def test_static_css_is_served(client: FlaskClient) -> None:
    resp = client.get("/explorer-static/explorer.css")
    assert resp.status_code == 200 and b"--accent" in resp.data


def test_tampered_storage_is_shown_as_not_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from ledger.tlog.note import NoteSigner
    from ledger.web._service import LogServiceView

    app = make_app()
    try:
        client = app.test_client()
        log = populate(client, fillers=0)
        svc: LogServiceView = app.extensions["ktl"]
        real_get = svc.storage.get_entry

        def tampered(index: int):  # type: ignore[no-untyped-def]
            e = real_get(index)
            return None if e is None else dataclasses.replace(e, data=e.data.replace(b"in-toto+json", b"in-toto+jsoN"))

        monkeypatch.setattr(svc.storage, "get_entry", tampered)
        text = " ".join(_text(client.get(f"/entries/{log.kernel}").get_data(as_text=True)).split())
        assert "✗ not verified : the stored leaf hash does not match the entry bytes" in text
        assert "✗ does not verify" in text
        monkeypatch.undo()

        from attest import generate_private_key
        other = NoteSigner(ORIGIN, generate_private_key()).verifier_key_string()
        monkeypatch.setattr(svc, "verifier_key", other)
        home = " ".join(_text(client.get("/").get_data(as_text=True)).split())
        assert "✗ the latest checkpoint does not verify" in home
        entry = " ".join(_text(client.get(f"/entries/{log.kernel}").get_data(as_text=True)).split())
        assert "✗ not verified" in entry
    finally:
        close_app(app)


# -- issue 16: verdicts where customers land --------------------------------------------------


def test_a_refuted_claims_own_page_says_so_first(client: FlaskClient, log: Populated) -> None:
    body = client.get(f"/entries/{log.claim_refuted}").get_data(as_text=True)
    text = " ".join(_text(body).split())
    top = text[: text.index("Statement")]  # before the signatures and the predicate
    # test-lab refuted it twice (#first, then #second): its newest verdict, counted once
    assert f"refuted by reproducer 'test-lab' in #{log.second}" in top
    assert f"in #{log.first}" not in top
    assert "measured 1.11\u00d7 [1.07, 1.15] (claimed 3\u00d7)" in top
    assert "below 70% of the claimed lower bound" in top
    assert 'class="card verdicts bad-card"' in body
    ok = " ".join(_text(client.get(f"/entries/{log.claim_ok}").get_data(as_text=True)).split())
    assert f"confirmed by reproducer 'test-lab' in #{log.first}" in ok and "refuted by" not in ok


def test_a_verdict_naming_another_leaf_does_not_count(client: FlaskClient, log: Populated) -> None:
    # The legacy reproduction judges log.benchmark through its target; the issue-16 ones
    # name only their claims, so the kernel entry they target gets no verdict.
    kernel_page = " ".join(_text(client.get(f"/entries/{log.first - 3}").get_data(
        as_text=True)).split())
    assert "Reproductions of this claim" not in kernel_page
    legacy = " ".join(_text(client.get(f"/entries/{log.benchmark}").get_data(as_text=True)).split())
    assert f"refuted by reproducer 'test-lab' in #{log.reproduction}" in legacy


def test_list_pages_carry_verdict_badges(client: FlaskClient, log: Populated) -> None:
    def badge_of(body: str, index: int) -> str:
        row = re.search(rf'href="/entries/{index}">#{index}</a></td>\s*<td>(.*?)</td>', body, re.S)
        assert row is not None, index
        found = re.search(r"verdict-(\w+)", row.group(1))
        return found.group(1) if found else ""

    for page in ("/", f"/search?field=name&q={ISSUE_NAME}", f"/entries/{log.first}"):
        body = client.get(page).get_data(as_text=True)
        assert badge_of(body, log.claim_refuted) == "refuted", page
        assert badge_of(body, log.claim_ok) == "confirmed", page


def test_kernel_page_counts_claims_and_heads_reproductions(client: FlaskClient,
                                                           log: Populated) -> None:
    text = " ".join(_text(client.get(f"/kernels/{log.issue_subject}").get_data(
        as_text=True)).split())
    assert "1 claim refuted" in text  # two refuting verdicts, one refuted claim
    assert "not reproduced yet" not in text
    assert f"#{log.first} judging #{log.claim_ok} , #{log.claim_refuted} : refuted" in text
    assert f"#{log.second} judging #{log.claim_refuted} : refuted" in text
