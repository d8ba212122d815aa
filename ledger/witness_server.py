"""The witness's HTTP service (C2SP tlog-witness) and its key.

``POST /add-checkpoint`` answers 200 with the cosignature line, 400 malformed,
403 bad log signature, 404 unknown origin, 409 (body: the held size,
``text/x.tlog.size``) wrong old size, 413 too large, 422 inconsistent.
``GET /<sha256 hex of origin>/checkpoint`` serves the latest cosigned checkpoint
(the spec's monitoring path); ``GET /`` names the witness and its key.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flask import Flask, Response, request

from ledger.serve import BootWatch, _Gunicorn
from ledger.server import write_signer
from ledger.tlog.cosignature import CosignatureError, CosignatureSigner
from ledger.tlog.note import NoteError, NoteSignature
from ledger.tlog.witness import (
    MAX_REQUEST_BYTES,
    SIZE_MEDIA_TYPE,
    AddCheckpoint,
    Cosign,
    RequestError,
    WitnessError,
)
from ledger.witness_store import WitnessStore

KEY_FILE = "witness.key"
DEFAULT_NAME = "localhost/witness"


class WitnessKeyError(WitnessError):
    """The witness key file is unreadable, malformed, or for another name."""


def load_or_create_witness_key(data_dir: str | Path, name: str | None = None
                               ) -> CosignatureSigner:
    """``<data>/witness.key``: created (mode 0600) on first start, its name fixed then."""
    path = Path(data_dir) / KEY_FILE
    if not path.exists():
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        signer = CosignatureSigner(name or DEFAULT_NAME, Ed25519PrivateKey.generate())
        write_signer(path, signer)
        return signer
    try:
        signer = CosignatureSigner.from_key_string(path.read_text("ascii").strip())
    except (OSError, UnicodeDecodeError, NoteError) as exc:
        raise WitnessKeyError(f"{path} is not a witness key: {exc}") from None
    if name is not None and name != signer.name:
        raise WitnessKeyError(f"the witness key in {path} is named {signer.name!r}, not "
                              f"{name!r}: drop --name or use a new data folder")
    return signer


def read_witness_key(data_dir: str | Path) -> CosignatureSigner:
    """The existing witness key (for `ktl witness key`), never creating one."""
    if not (Path(data_dir) / KEY_FILE).exists():
        raise WitnessKeyError(f"no witness key in {data_dir}: start it once with "
                              f"`ktl witness serve --data {data_dir}`")
    return load_or_create_witness_key(data_dir)


def origin_hash(origin: str) -> str:
    """The monitoring path's name for a log: lowercase hex SHA-256 of its origin."""
    return hashlib.sha256(origin.encode()).hexdigest()


def _text(body: str, status: int, mimetype: str = "text/plain") -> Response:
    return Response(body, status=status, mimetype=mimetype)


def _add_checkpoint(store: WitnessStore, cosign: Callable[[Cosign], bytes]) -> Response:
    """`POST /add-checkpoint`: the request body (at most MAX_REQUEST_BYTES) parsed, then the
    store's decision: the cosignature lines, the held size (409) or why not."""
    length = request.content_length
    if length is not None and length > MAX_REQUEST_BYTES:
        return _text(f"request body is larger than {MAX_REQUEST_BYTES} bytes\n", 413)
    body = request.stream.read(MAX_REQUEST_BYTES + 1)
    if len(body) > MAX_REQUEST_BYTES:
        return _text(f"request body is larger than {MAX_REQUEST_BYTES} bytes\n", 413)
    try:
        parsed = AddCheckpoint.parse(body)
    except RequestError as exc:
        return _text(f"{exc}\n", 400)
    try:
        decision, lines = store.add_checkpoint(parsed, cosign)
    except CosignatureError as exc:  # the checkpoint text cannot be cosigned
        return _text(f"{exc}\n", 400)
    if isinstance(decision, Cosign):
        return _text(lines.decode(), 200)
    if decision.status == 409:
        return _text(f"{decision.held_size}\n", 409, SIZE_MEDIA_TYPE)
    return _text(f"{decision.message}\n", decision.status)


def create_witness_app(store: WitnessStore, signer: CosignatureSigner) -> Flask:
    """The witness's Flask app over ``store``, cosigning with ``signer``."""
    app = Flask("ktl-witness")
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    def cosign(accepted: Cosign) -> bytes:
        text = accepted.signed.checkpoint.to_text().encode()
        return NoteSignature(signer.name, signer.key_id, signer.sign(text)).line().encode()

    @app.post("/add-checkpoint")
    def add_checkpoint() -> Response:
        return _add_checkpoint(store, cosign)

    @app.get("/<string:ohash>/checkpoint")
    def held_checkpoint(ohash: str) -> Response:
        for log in store.logs():
            if origin_hash(log.origin) == ohash:
                held = store.held(log.origin)
                if held is not None:
                    return Response(held.note, 200, mimetype="text/plain")
        return _text("this witness has cosigned no checkpoint for that origin hash\n", 404)

    @app.get("/")
    def about() -> Response:
        lines = [f"witness {signer.name}", f"key {signer.verifier_key_string()}"]
        lines += [f"log {log.origin}" for log in store.logs()]
        return _text("\n".join(lines) + "\n", 200)

    @app.errorhandler(413)
    def too_large(_: Any) -> Response:
        return _text(f"request body is larger than {MAX_REQUEST_BYTES} bytes\n", 413)

    @app.errorhandler(404)
    def not_found(_: Any) -> Response:
        return _text("not found\n", 404)

    @app.errorhandler(405)
    def bad_method(_: Any) -> Response:
        return _text("method not allowed\n", 405)

    return app


@dataclass(frozen=True)
class WitnessOptions:
    data_dir: str
    name: str | None = None
    host: str = "127.0.0.1"
    port: int = 8090
    threads: int = 16
    #: Seconds the worker has to boot and answer before the witness gives up (`BootWatch`).
    boot_timeout: float = 60.0


def run_witness(opts: WitnessOptions, progress: Callable[[str], None] = print) -> None:
    """Create or load the key, print it, serve, print the URL once the worker answers, and
    serve until SIGTERM/SIGINT; `ledger.serve.ServeError` if it never comes up."""

    signer = load_or_create_witness_key(opts.data_dir, opts.name)
    WitnessStore(opts.data_dir).close()
    progress(f"witness name: {signer.name}")
    progress(f"witness key:  {signer.verifier_key_string()}")

    watch = BootWatch(1, "/", opts.boot_timeout, progress)

    def factory() -> Flask:
        return create_witness_app(WitnessStore(opts.data_dir), signer)

    options: dict[str, Any] = {
        "bind": f"{opts.host}:{opts.port}", "workers": 1, "worker_class": "ledger._front.FrontWorker",
        "threads": opts.threads, "timeout": 60, "keepalive": 5, "errorlog": "-",
        "loglevel": "warning", "proc_name": "ktl-witness",
        "graceful_timeout": 10, "accesslog": None, **watch.options(),
    }
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    watch.run(_Gunicorn(factory, options))
