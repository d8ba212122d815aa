"""client.models parsing and client.api.LogClient transport rules (caps, retries, errors)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from typing import Any

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st
from requests.adapters import BaseAdapter

from client import InputError, NetworkError, ServerError
from client.api import LogClient, Transport
from client.models import EntryRecord, LogInfo, SearchHit, SearchPage, SubmitResult
from ledger.tlog import SearchAnswerError

H = bytes(range(32))
NOTE = b"o\n1\n" + base64.b64encode(H) + b"\n\n\xe2\x80\x94 o AAAA\n"


def _samples() -> list[Any]:
    return [
        LogInfo("o", "o+01020304+AQ==", 3, 65535, 1 << 20, 100, NOTE),
        SubmitResult(2, H, 3, (H, H), NOTE, False),
        EntryRecord(0, H, b'{"a":1}', 1, (), NOTE),
        SearchPage((SearchHit(1, H, "acme/k", H.hex(), "t", (H.hex(),)),), 7),
    ]


@pytest.mark.parametrize("obj", _samples(), ids=lambda o: type(o).__name__)
def test_models_round_trip(obj: Any) -> None:
    again = json.loads(json.dumps(obj.to_json()))
    if isinstance(obj, SearchPage):  # the shared wire type: its rows are parsed as given
        assert SearchPage.from_json(again, SearchHit.from_json) == obj
    else:
        assert type(obj).from_json(again) == obj


@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["results", "next_cursor", "index", "leaf_hash", "keyids", "x"]),
        kids, max_size=5),
    max_leaves=12))
def test_search_answers_reject_garbage_with_their_own_error(value: Any) -> None:
    with contextlib.suppress(SearchAnswerError):
        SearchPage.from_json(value, SearchHit.from_json)
    with contextlib.suppress(SearchAnswerError):
        SearchHit.from_json(value)


@pytest.mark.parametrize("cls", [LogInfo, SubmitResult, EntryRecord])
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=12))
def test_models_reject_garbage_with_server_error(cls: Any, value: Any) -> None:
    with contextlib.suppress(ServerError):
        cls.from_json(value)


def test_models_reject_wrong_hash_length_and_long_proofs() -> None:
    good = SubmitResult(2, H, 3, (H, H), NOTE, False).to_json()
    bad = dict(good, inclusion_proof=[base64.b64encode(b"short").decode()])
    with pytest.raises(ServerError, match="not 32 bytes"):
        SubmitResult.from_json(bad)
    with pytest.raises(ServerError, match="<= 64"):
        SubmitResult.from_json(dict(good, inclusion_proof=good["inclusion_proof"] * 40))
    with pytest.raises(ServerError, match="hex"):
        SubmitResult.from_json(dict(good, leaf_hash="XY" * 32))
    with pytest.raises(ServerError, match="integer"):
        SubmitResult.from_json(dict(good, index=True))


class Canned(BaseAdapter):
    """A transport that answers from a list of (status, body, headers) or raises."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__()
        self.answers = answers
        self.calls: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kw: Any) -> requests.Response:
        self.calls.append(request)
        ans = self.answers.pop(0)
        if isinstance(ans, Exception):
            raise ans
        status, body, headers = ans
        resp = requests.Response()
        resp.status_code = status
        resp.headers.update(headers)
        resp.raw = __import__("io").BytesIO(body)
        resp.url = request.url or ""
        resp.request = request
        return resp

    def close(self) -> None:
        pass


def _client(answers: list[Any]) -> tuple[LogClient, Canned]:
    s = requests.Session()
    adapter = Canned(answers)
    s.mount("http://", adapter)
    return LogClient("http://log.test", session=s, transport=Transport(retries=3)), adapter


def test_retries_connection_errors_then_succeeds() -> None:
    info = _samples()[0].to_json()
    c, a = _client([requests.ConnectionError("boom"), (503, b"", {}),
                    (200, json.dumps(info).encode(), {})])
    assert c.info().origin == "o"
    assert len(a.calls) == 3


def test_gives_up_after_bounded_retries() -> None:
    c, a = _client([requests.ConnectionError("x")] * 3)
    with pytest.raises(NetworkError, match="after 3 attempts"):
        c.checkpoint()
    assert len(a.calls) == 3


def test_error_body_is_reported_with_code() -> None:
    body = json.dumps({"error": {"code": "entry_too_large", "message": "too big"}}).encode()
    c, _ = _client([(413, body, {})])
    with pytest.raises(ServerError, match="entry_too_large") as ei:
        c.submit(b"{}")
    assert ei.value.status == 413


def test_answers_are_size_capped() -> None:
    c, _ = _client([(200, b"x" * 20000, {})])
    with pytest.raises(ServerError, match="more than the 16384 bytes"):
        c.checkpoint()
    c, _ = _client([(200, b"", {"Content-Length": "999999"})])
    with pytest.raises(ServerError, match="999999 bytes"):
        c.tile("tile/0/000")


def test_blob_digest_is_checked() -> None:
    want = hashlib.sha256(b"good").hexdigest()
    c, _ = _client([(200, b"evil", {})])
    with pytest.raises(ServerError, match="refusing"):
        c.get_blob(want)
    with pytest.raises(InputError):
        c.get_blob("not-a-digest")
    with pytest.raises(InputError, match="not a sha256 digest"):  # `$` once let a newline by
        c.get_blob(want + "\n")


def test_rejects_bad_urls_and_paths() -> None:
    with pytest.raises(InputError):
        LogClient("ftp://x")
    c, _ = _client([])
    with pytest.raises(InputError):
        c.tile("../etc/passwd")
    with pytest.raises(InputError):
        c.search()


def test_deeply_nested_json_is_a_server_error() -> None:
    c, _ = _client([(200, b"[" * 100000, {})])
    with pytest.raises(ServerError, match="not JSON"):
        c.info()


def test_a_malformed_search_answer_is_a_server_error() -> None:
    """The shared wire type raises its own error; the client says the log answered wrong."""
    bad_keyid = {"results": [{"index": 1, "leaf_hash": "ab" * 32, "subject_name": "acme/k",
                              "subject_sha256": "ab" * 32, "predicate_type": "t",
                              "keyids": ["not-hex"]}], "next_cursor": None}
    c, _ = _client([(200, json.dumps(bad_keyid).encode(), {})])
    with pytest.raises(ServerError, match="log answer for search result: keyid"):
        c.search(digest="ab" * 32)
