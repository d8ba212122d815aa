"""The explorer's views: log home, entry, kernel, search. Read-only, server-rendered."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    redirect,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from attest.ops import ordered_shape
from attest.policy import unknown_signer_phrase
from ledger import LedgerError
from ledger.storage import EntrySummary, StoredCheckpoint
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_inclusion
from ledger.tlog.note import NoteVerifier
from ledger.web._decode import (
    KINDS,
    DecodedEntry,
    decode_for_display,
    is_hex64,
    predicate_kind,
    predicate_type_of,
)
from ledger.web._index_status import index_status
from ledger.web._kernel import summarize_kernel
from ledger.web._note_lines import signature_lines
from ledger.web._reading import PerCheckpoint, read_digest_page
from ledger.web._service import LogServiceView, reproducer_names, reproducer_panel, service
from ledger.web._verdict_reading import VerdictReading, read_digest_verdicts, read_verdicts
from ledger.web._verdicts import badge, refuted_counts, reproducer_name, settled, why_line
from ledger.web.chart import render_speedup_chart

#: Strict policy: no scripts at all, styles and images only from this origin.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
RECENT = 20
PAGE_DEFAULT = 25
PAGE_MAX = 100
MAX_QUERY_CHARS = 256
#: `app.extensions` key of the home page's per-checkpoint cache.
HOME_CACHE = "ktl-home-cache"
_CLAIM_KINDS = ("benchmark", "verification")
_INDEX = re.compile(r"[0-9]{1,18}")
SEARCH_FIELDS = ("auto", "digest", "name", "keyid", "predicate_type")

bp = Blueprint(
    "explorer",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/explorer-static",
)


@bp.after_request
def _security_headers(resp: Response) -> Response:
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Frame-Options"] = "DENY"
    return resp


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException) -> tuple[str, int]:
    code = exc.code or 500
    return render_template(
        "explorer/error.html", code=code, title=exc.name, message=exc.description
    ), code


@bp.app_template_filter("age")
def _age(ts: float | None) -> str:
    if ts is None:
        return "unknown"
    secs = max(0, int(time.time() - ts))
    if secs < 60:
        return f"{secs} s ago"
    if secs < 3600:
        return f"{secs // 60} min ago"
    if secs < 86400:
        return f"{secs // 3600} h {secs % 3600 // 60} min ago"
    return f"{secs // 86400} d ago"


@bp.app_template_filter("utc")
def _utc(ts: float | None) -> str:
    if ts is None:
        return "unknown"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@bp.app_template_filter("kind")
def _kind(predicate_type: str) -> str:
    return predicate_kind(predicate_type)


@bp.app_template_global("why_line")
def _why_line(row: object) -> str:
    """A verdict row's reason in one line (`_verdicts.why_line`)."""
    return why_line(row) if isinstance(row, dict) else ""


@bp.app_template_global("reproducer_by")
def _reproducer_by(signers: object) -> str:
    """`by reproducer 'uni-lab'` when the operator names a signer, else `by an unknown key …`."""
    keys = tuple(str(k) for k in signers) if isinstance(signers, list | tuple) else ()
    name = reproducer_name(keys, reproducer_names())
    return f"by reproducer {name!r}" if name is not None else unknown_signer_phrase(keys)


@bp.app_template_global("reproducer_of")
def _reproducer_of(signers: object) -> str | None:
    """The operator's name for one of these signers, None for a stranger's key."""
    keys = tuple(str(k) for k in signers) if isinstance(signers, list | tuple) else ()
    return reproducer_name(keys, reproducer_names())


@bp.app_template_filter("in_op_order")
def _in_op_order(shape: object, op: object) -> object:
    """A result's shape with the op's dimensions in catalogue order (canonical JSON sorts
    them); anything that is not a shape of a named op is shown as it is."""
    if not isinstance(shape, Mapping) or not isinstance(op, str):
        return shape
    return ordered_shape(op, shape)


@bp.app_template_filter("num")
def _num(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"


class CheckpointView(NamedTuple):
    stored: StoredCheckpoint
    verified: bool
    problem: str
    cosignatures: list[Any]


def _checkpoint(svc: LogServiceView) -> CheckpointView | None:
    stored = svc.latest_checkpoint()
    if stored is None:
        return None
    problem = ""
    verified = False
    try:
        signed = open_checkpoint(
            stored.note, NoteVerifier.from_key_string(svc.verifier_key), origin=svc.origin
        )
        cp = signed.checkpoint
        if cp.size != stored.size or cp.root_hash != stored.root_hash:
            problem = "the signed checkpoint does not match the stored size and root"
        else:
            verified = True
    except LedgerError as exc:
        problem = f"the latest checkpoint does not verify: {exc}"
    log_name = svc.verifier_key.split("+", 1)[0]
    cosigs = [s for s in signature_lines(stored.note) if s.name != log_name]
    return CheckpointView(stored, verified, problem, cosigs)


def _verdicts(svc: LogServiceView, rows: list[EntrySummary]) -> VerdictReading:
    """The logged verdicts about the claim entries among `rows`, bounded and newest first
    (see `ledger.web._verdict_reading`)."""
    claims = {r.index: r.leaf_hash.hex() for r in rows
              if predicate_kind(r.predicate_type) in _CLAIM_KINDS}
    if not claims:
        return VerdictReading({}, True, 0)
    digests = [r.subject_sha256 for r in rows if r.index in claims]
    return read_verdicts(svc.storage, svc.tree_size(), claims, digests, reproducer_names())


#: Raw samples blobs one kernel page reads to recompute its claims' figures, and the
#: largest it reads (issue 42 item 2: the figures are checked, at a bounded cost).
SAMPLES_BLOBS = 8
SAMPLES_BLOB_BYTES = 4 * 1024 * 1024


def _samples_of(svc: LogServiceView, entries: Iterable[tuple[int, DecodedEntry]]
                ) -> dict[str, bytes]:
    """The raw samples blobs the page's benchmark entries name (sha256 hex -> bytes), the
    first `SAMPLES_BLOBS` that the log holds and that are at most `SAMPLES_BLOB_BYTES`."""
    out: dict[str, bytes] = {}
    for _, d in entries:
        pred = d.predicate if d.kind == "benchmark" and isinstance(d.predicate, dict) else {}
        ref = pred.get("samples")
        sha = ref.get("sha256") if isinstance(ref, dict) else None
        if not isinstance(sha, str) or not is_hex64(sha) or sha in out:
            continue
        if len(out) >= SAMPLES_BLOBS:
            break
        size = svc.storage.blob_info(sha)
        blob = svc.storage.get_blob(sha) if size is not None and size <= SAMPLES_BLOB_BYTES \
            else None
        if blob is not None:
            out[sha] = blob
    return out


def _reproductions_logged(svc: LogServiceView, digest: str) -> int:
    """How many reproductions name `digest`, from its summary (one row per type)."""
    return sum(k.entries for k in svc.storage.digest_summary(digest).kinds
               if predicate_kind(k.predicate_type) == "reproduction")


def _badges(svc: LogServiceView, rows: list[EntrySummary]) -> dict[int, str]:
    """Per claim entry among `rows`: `refuted`, `confirmed` or `inconclusive` (see badge)."""
    panel = reproducer_panel()
    return {index: badge(vs, panel) for index, vs in _verdicts(svc, rows).verdicts.items()}


@bp.get("/")
def home() -> str:
    svc = service()
    cp = _checkpoint(svc)
    size = cp.stored.size if cp else 0

    def listing() -> tuple[list[EntrySummary], dict[int, str]]:
        recent = [r for r in svc.storage.recent_entries(RECENT) if r.index < size]
        return recent, _badges(svc, recent)

    # The listing and its badges change only with the tree: once per checkpoint, not per
    # visitor (what a visitor sees of the checkpoint itself is read fresh).
    cache = current_app.extensions.setdefault(HOME_CACHE, PerCheckpoint())
    recent, badges = cache.get(size, cp.stored.root_hash if cp else b"", listing) \
        if cp else ([], {})
    return render_template(
        "explorer/home.html", origin=svc.origin, verifier_key=svc.verifier_key, cp=cp,
        recent=recent, kinds=KINDS, badges=badges,
    )


class ProofView(NamedTuple):
    tree_size: int
    hashes: list[str]
    verified: bool
    problem: str


def _prove(svc: LogServiceView, index: int, data: bytes, stored_leaf: bytes,
           cp: CheckpointView) -> ProofView:
    size = cp.stored.size
    if not cp.verified:
        return ProofView(size, [], False, cp.problem)
    computed = leaf_hash(data)
    if computed != stored_leaf:
        return ProofView(size, [], False, "the stored leaf hash does not match the entry bytes")
    try:
        proof = svc.inclusion_proof(index, size)
        verify_inclusion(computed, index, size, proof, cp.stored.root_hash)
    except LedgerError as exc:
        return ProofView(size, [], False, f"inclusion proof failed: {exc}")
    return ProofView(size, [h.hex() for h in proof], True, "")


@bp.get("/entries/<index_text>")
def entry(index_text: str) -> str:
    if not _INDEX.fullmatch(index_text):
        abort(404, f"There is no entry {index_text[:40]!r}: entries are numbered 0, 1, 2, ...")
    index = int(index_text)
    svc = service()
    cp = _checkpoint(svc)
    size = cp.stored.size if cp else 0
    stored = svc.storage.get_entry(index) if index < size else None
    if stored is None or cp is None:
        abort(404, f"The log has no entry {index}: it holds {size} entries (0 to {size - 1}).")
    decoded = decode_for_display(stored.data, pretty=True)
    proof = _prove(svc, index, stored.data, stored.leaf_hash, cp)
    related: list[EntrySummary] = []
    seen: set[int] = {index}
    for _, sha in stored.subjects[:4]:
        page = svc.storage.search("digest", sha, 0, 50)
        for r in page.results:
            if r.index not in seen and r.index < size:
                seen.add(r.index)
                related.append(r)
    related.sort(key=lambda r: r.index)
    reading = _verdicts(svc, [stored.summary(), *related])
    panel = reproducer_panel()
    mine = reading.verdicts.get(index, [])
    return render_template(
        "explorer/entry.html", index=index, stored=stored, d=decoded, proof=proof, cp=cp,
        related=related, origin=svc.origin, verdicts=mine, settled=settled(mine, panel),
        verdicts_complete=reading.complete,
        reproductions_logged=0 if reading.complete else _reproductions_logged(
            svc, stored.summary().subject_sha256),
        badges={i: badge(vs, panel) for i, vs in reading.verdicts.items()},
    )


@bp.get("/kernels/<digest>")
def kernel(digest: str) -> str:
    if not is_hex64(digest):
        abort(400, "A kernel is named by the SHA-256 of its source archive: 64 lowercase hex "
                   "characters.")
    cursor = _int_arg(request.args, "cursor", 0, 0, (1 << 63) - 1)
    svc = service()
    page = read_digest_page(svc.storage, digest, svc.tree_size(), cursor)
    if not page.entries:
        if cursor == 0 or not page.summary.kinds:
            abort(404, f"No entry in the log names a subject with digest {digest}.")
        abort(404, f"No entry about {digest} from index {cursor} on.")
    summary = summarize_kernel(digest, page.entries, page.leaves, reproducer_names(),
                               reproducer_panel(), _samples_of(svc, page.entries))
    chart = Markup(render_speedup_chart(summary.chart_rows))
    status = index_status(svc, digest, (i for i, _ in page.entries), cursor, page.next_cursor)
    # refutations counted over the whole digest, read newest first, whatever this page holds
    reading = read_digest_verdicts(svc.storage, svc.tree_size(), digest, reproducer_names())
    refuted, refuted_unknown = refuted_counts(reading.verdicts, reproducer_panel())
    return render_template(
        "explorer/kernel.html", digest=digest, s=summary, chart=chart, page=page,
        counts=[(predicate_kind(k.predicate_type), k) for k in page.summary.kinds],
        index_status=status, refuted=refuted, refuted_unknown=refuted_unknown,
        verdicts_complete=reading.complete,
    )


class _Query(NamedTuple):
    q: str
    field: str
    cursor: int
    limit: int


def _int_arg(args: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    if not _INDEX.fullmatch(raw):
        abort(400, f"'{name}' must be a whole number from {lo} to {hi}.")
    value = int(raw)
    if not lo <= value <= hi:
        abort(400, f"'{name}' must be from {lo} to {hi}, got {value}.")
    return value


def _parse_query() -> _Query:
    args = request.args
    q = args.get("q", "").strip()
    if len(q) > MAX_QUERY_CHARS:
        abort(400, f"The search text is too long: at most {MAX_QUERY_CHARS} characters.")
    field = args.get("field", "auto") or "auto"
    if field not in SEARCH_FIELDS:
        abort(400, f"'field' must be one of {', '.join(SEARCH_FIELDS)}.")
    cursor = _int_arg(args, "cursor", 0, 0, (1 << 63) - 1)
    limit = _int_arg(args, "limit", PAGE_DEFAULT, 1, PAGE_MAX)
    return _Query(q, field, cursor, limit)


def _resolve(q: str, field: str) -> tuple[str, str]:
    """The storage field and value to search for; 400 on a value that cannot match."""
    if field == "auto":
        if is_hex64(q.lower()):
            return "digest", q.lower()
        field = "predicate_type" if q in KINDS or q.startswith("https://") else "name"
    if field in ("digest", "keyid"):
        if not is_hex64(q.lower()):
            abort(400, f"A {field} is 64 hex characters (SHA-256).")
        return field, q.lower()
    if field == "predicate_type":
        uri = predicate_type_of(q) or q
        return field, uri
    return field, q


@bp.get("/search")
def search() -> BaseResponse | str:
    query = _parse_query()
    svc = service()
    if not query.q:
        return render_template("explorer/search.html", query=query, results=None, kinds=KINDS)
    if query.field == "auto" and _INDEX.fullmatch(query.q):
        return redirect(url_for("explorer.entry", index_text=int(query.q)))
    field, value = _resolve(query.q, query.field)
    size = svc.tree_size()
    page = svc.storage.search(field, value, query.cursor, query.limit)
    if field == "digest" and query.field == "auto" and not page.results and query.cursor == 0:
        # A bare 64-hex string may be a signer key id rather than a subject digest.
        keyid_page = svc.storage.search("keyid", value, 0, query.limit)
        if keyid_page.results:
            field, page = "keyid", keyid_page
    results = [r for r in page.results if r.index < size]
    next_cursor = page.next_cursor if page.next_cursor is not None and page.next_cursor < size \
        else None
    return render_template(
        "explorer/search.html", query=query, results=results, field=field, value=value,
        next_cursor=next_cursor, kinds=KINDS, badges=_badges(svc, results),
    )
