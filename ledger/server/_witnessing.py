"""The log asks its witnesses to cosign each new checkpoint (C2SP tlog-witness, as a client).

`Witnessing` runs one thread per server process. The sequencer `offer`s it every
checkpoint it signs; the thread sends ``add-checkpoint`` to every witness of the
policy at once (each request bounded by a timeout), proving consistency from the
size each witness holds: it starts from what it last got cosigned, and a 409 tells
it the witness's size, from which it proves again. Each answer is verified under
that witness's key before it counts. Once the cosignatures meet the policy's
quorum the checkpoint is published (`LogStorage.publish_cosigned`); until then the
thread retries with exponential backoff, and a newer checkpoint replaces the one
pending (it covers everything the older one did).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import requests

from ledger import LedgerError
from ledger.storage import LogStorage, StoredCheckpoint, StoredHashReader, TileCache
from ledger.tlog.cosignature import verify_cosignatures
from ledger.tlog.merkle import consistency_proof
from ledger.tlog.note import NoteSignature, NoteVerifier, split_note
from ledger.tlog.witness import (
    MAX_REQUEST_BYTES,
    SIZE_MEDIA_TYPE,
    encode_add_checkpoint,
    parse_size,
)
from ledger.tlog.witness_policy import MAX_POLICY_BYTES, PolicyWitness, WitnessPolicy

_log = logging.getLogger("ktl.witnessing")
#: Largest witness answer read (bytes): a few cosignature lines.
MAX_ANSWER_BYTES = 16 * 1024


class WitnessingError(LedgerError):
    """The log's witness policy is unusable (unreadable, or a witness without a URL)."""


def load_log_policy(path: str) -> WitnessPolicy:
    """The policy a log serves with: every witness must have a URL to ask."""
    try:
        data = Path(path).read_bytes()[: MAX_POLICY_BYTES + 1]
    except OSError as exc:
        raise WitnessingError(f"cannot read the witness policy {path}: {exc}") from None
    policy = WitnessPolicy.parse(data)
    no_url = [w.name for w in policy.witnesses if not w.url]
    if no_url:
        raise WitnessingError(f"witness policy {path}: the log must reach every witness, but "
                              f"{', '.join(no_url)} has no URL")
    return policy


@dataclass(frozen=True)
class WitnessingSettings:
    request_timeout: float = 5.0
    max_backoff: float = 5.0
    #: The most one round waits for all witnesses; a slower one is skipped that round.
    round_timeout: float = 5.0


class Witnessing:
    """Collects cosignatures for the newest checkpoint and publishes it at quorum."""

    def __init__(
        self,
        storage: LogStorage,
        policy: WitnessPolicy,
        log_verifier: NoteVerifier,
        cache: TileCache,
        settings: WitnessingSettings = WitnessingSettings(),
        post: Callable[[str, bytes, float], tuple[int, str, bytes]] | None = None,
    ) -> None:
        self.storage = storage
        self.policy = policy
        self.log_verifier = log_verifier
        self.cache = cache
        self.settings = settings
        self._http = threading.local()
        self._post = post or self._requests_post
        self._held: dict[str, int] = {}
        self._asking: dict[str, Future[bytes | None]] = {}
        self._pending: StoredCheckpoint | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._pool = ThreadPoolExecutor(max(1, len(policy.witnesses)),
                                        thread_name_prefix="ktl-witness")
        self._thread = threading.Thread(target=self._run, name="ktl-witnessing", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def offer(self, cp: StoredCheckpoint) -> None:
        """A checkpoint the log signed; the newest one offered is the one pursued."""
        with self._cond:
            if self._pending is None or cp.size > self._pending.size:
                self._pending = cp
                self._cond.notify_all()

    # ---- the thread
    def _next(self, current: StoredCheckpoint | None, wait: float) -> StoredCheckpoint | None:
        """The checkpoint to pursue next: a newer offer, else `current` after `wait` s."""
        with self._cond:
            deadline = time.monotonic() + wait
            while not self._closed:
                offered = self._pending
                if offered is not None:
                    self._pending = None  # taken: pursued until published or superseded
                    if current is None or offered.size > current.size:
                        return offered
                left = deadline - time.monotonic()
                if current is not None and left <= 0:
                    return current
                self._cond.wait(None if current is None else left)
            return None

    def _run(self) -> None:
        current: StoredCheckpoint | None = None
        lines: dict[str, bytes] = {}
        failures = 0
        while True:
            wait = 0.0 if current is None else min(self.settings.max_backoff,
                                                    0.1 * 2 ** min(failures, 10))
            nxt = self._next(current, wait)
            if nxt is None:
                return
            if current is None or nxt.size != current.size:
                current, lines, failures = nxt, {}, 0
            published = self.storage.latest_cosigned()
            if published is not None and published.size >= current.size:
                current = None  # already published (another process got there)
                continue
            cp = current
            try:
                if self._round(cp, lines):
                    current = None
                    continue
            except Exception as exc:  # keep the thread alive; the next round retries
                _log.error("witnessing checkpoint %d failed: %s", cp.size, exc)
            failures += 1

    def _round(self, cp: StoredCheckpoint, lines: dict[str, bytes]) -> bool:
        """Ask every witness that has not cosigned `cp` yet; publish at quorum."""
        asked: dict[str, Future[bytes | None]] = {}
        for w in self.policy.witnesses:
            if w.name in lines:
                continue
            prev = self._asking.get(w.name)
            if prev is not None and not prev.done():
                continue  # still stuck on an earlier round: skipped, never asked twice
            asked[w.name] = self._asking[w.name] = self._pool.submit(self._ask, w, cp)
        # A witness that does not answer within the round's deadline is skipped for this
        # round (the others may meet the quorum without it), never waited on.
        done, _ = wait(list(asked.values()), timeout=self.settings.round_timeout)
        for name, fut in asked.items():
            if fut not in done:
                _log.warning("witness %s did not answer within %g s; skipped this round",
                             name, self.settings.round_timeout)
            elif fut.exception() is not None:
                _log.error("asking witness %s failed: %s", name, fut.exception())
            elif (got := fut.result()) is not None:
                lines[name] = got
        signed = [(w.verifier.name, w.verifier.key_id) for w in self.policy.witnesses
                  if w.name in lines]
        met, _, missing = self.policy.evaluate(signed)
        if not met:
            _log.warning("checkpoint %d: witness quorum not met yet (missing %s)", cp.size,
                         ", ".join(missing))
            return False
        note = cp.note + b"".join(lines[w.name] for w in self.policy.witnesses
                                  if w.name in lines)
        self.storage.publish_cosigned(StoredCheckpoint(cp.size, cp.root_hash, note, time.time()))
        return True

    def _ask(self, witness: PolicyWitness, cp: StoredCheckpoint) -> bytes | None:
        """One witness's cosignature line for `cp`, or None (logged) if it gave none."""
        old = self._held.get(witness.name, 0)
        for _ in range(3):
            if old > cp.size:
                return None  # it already cosigned a newer checkpoint; this one is superseded
            proof = consistency_proof(old, cp.size, StoredHashReader(self.storage, cp.size,
                                                                      self.cache)) \
                if 0 < old < cp.size else []
            body = encode_add_checkpoint(old, proof, cp.note)
            assert witness.url is not None
            try:
                status, mime, answer = self._post(f"{witness.url}/add-checkpoint", body,
                                                  self.settings.request_timeout)
            except (requests.RequestException, OSError) as exc:
                _log.warning("witness %s unreachable: %s", witness.name, exc)
                return None
            if status == 409 and mime == SIZE_MEDIA_TYPE:
                try:
                    old = parse_size(answer.decode("ascii").rstrip("\n"), "held size")
                except (UnicodeDecodeError, LedgerError):
                    return None
                continue
            if status != 200:
                _log.warning("witness %s refused checkpoint %d: %d %s", witness.name, cp.size,
                             status, answer[:200].decode("utf-8", "replace").strip())
                return None
            line = self._check_answer(witness, cp, answer)
            if line is not None:
                self._held[witness.name] = cp.size
            return line
        return None

    def _check_answer(self, witness: PolicyWitness, cp: StoredCheckpoint, answer: bytes
                      ) -> bytes | None:
        """The witness's own line from a 200 answer, verified; None if it does not verify."""
        v = witness.verifier
        try:
            verify_cosignatures(cp.note + answer, self.log_verifier, [v], 1)
            _, sigs = split_note(cp.note + answer)
        except LedgerError as exc:
            _log.warning("witness %s answered a cosignature that does not verify: %s",
                         witness.name, exc)
            return None
        mine = [s for s in sigs if (s.name, s.key_id) == (v.name, v.key_id)]
        return NoteSignature(mine[0].name, mine[0].key_id, mine[0].signature).line().encode()

    def _requests_post(self, url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        session: requests.Session | None = getattr(self._http, "session", None)
        if session is None:
            session = self._http.session = requests.Session()
        assert len(body) <= MAX_REQUEST_BYTES
        with session.post(url, data=body, timeout=timeout, stream=True) as r:
            answer = r.raw.read(MAX_ANSWER_BYTES + 1, decode_content=True)
            mime = (r.headers.get("Content-Type") or "").split(";")[0].strip()
            return r.status_code, mime, answer[:MAX_ANSWER_BYTES]
