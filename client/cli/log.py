"""`ktl publish | verify | get | search | log-info | monitor` (see docs/auditing.md and docs/publishing.md)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from attest.predicates import (
    BENCHMARK_V1,
    HEX64_PATTERN,
    PREDICATE_TYPES,
    REPRODUCTION_V1,
    VERIFICATION_V1,
)
from attest.text import plural
from client.errors import InputError, NetworkError
from client.output import Output, kv_table, rows_table, run_guarded, safe
from client.state import TrustedState, read_capped
from client.vindex import DEFAULT_MAX_PAGES, Paging
from client.witnesses import cosigners, load_witness_policy, witness_policy_option
from ledger.vindex import MAX_PAGE

if TYPE_CHECKING:
    from attest.policy import TrustPolicy
    from client.claims_view import ClaimReproductions
    from client.monitor import MonitorReport
    from client.vindex import CompleteList

F = TypeVar("F", bound=Callable[..., Any])
_HEX64 = re.compile(HEX64_PATTERN)


def log_option(fn: F) -> F:
    return click.option("--log", "log_url", envvar="KTL_LOG", metavar="URL",
                        help="Log base URL (default: $KTL_LOG).")(fn)


def log_key_option(fn: F) -> F:
    return click.option(
        "--log-key", envvar="KTL_LOG_KEY", metavar="KEYSTRING",
        help="The log's note verifier key (name+keyid+base64). Without it the key pinned "
             "in $KTL_HOME is used, or the log's advertised key is trusted on first use.",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")(fn)


def load_policy(path: Path | None) -> TrustPolicy | None:
    if path is None:
        return None
    from attest import AttestError
    from attest.policy import TrustPolicy

    read_capped(path, 1024 * 1024, "policy file")
    try:
        return TrustPolicy.load(path)
    except AttestError as exc:
        raise InputError(f"policy file {path} is invalid: {exc}") from exc


def _key_note(out: Output, how: str, describe: str) -> None:
    style = "bold yellow" if how == "tofu" else "dim"
    out.note(describe, style)


# -- publish ------------------------------------------------------------------------------


@click.command()
@click.argument("kernel_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--key", "key_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="Your Ed25519 private key (from `ktl keygen`).")
@click.option("--passphrase-env", metavar="VAR",
              help="Decrypt --key with the passphrase held in environment variable VAR.")
@click.option("--results", "results_path", type=click.Path(path_type=Path, dir_okay=False),
              help='JSON {"verification": <ktl check --json>, "benchmark": <ktl bench --json>}; '
                   "without it the checks and benchmark are run now.")
@click.option("--verification", "verification_path",
              type=click.Path(path_type=Path, dir_okay=False),
              help="Instead of --results: the output of `ktl check --json`.")
@click.option("--benchmark", "benchmark_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Instead of --results: the output of `ktl bench --json`.")
@click.option("--samples", "samples_path", type=click.Path(path_type=Path, dir_okay=False),
              help="The raw samples file of `ktl bench --samples-out` (uploaded as a blob).")
@click.option("--budget", type=click.Choice(["quick", "full"]), default="quick", show_default=True,
              help="Verification budget when running the checks (no results given).")
@click.option("--allow-weak", is_flag=True,
              help="Publish a weak benchmark (its own record says its measurement was "
                   "disturbed: steal or throttling, other load on its pinned CPU, an interval "
                   "wider than +-10 %, fewer than 3 runs); reproductions that cannot confirm "
                   "it say UNSUPPORTED.")
@log_option
@log_key_option
@witness_policy_option
@json_option
def publish(kernel_dir: Path, key_path: Path, passphrase_env: str | None,
            results_path: Path | None, verification_path: Path | None,
            benchmark_path: Path | None, samples_path: Path | None, budget: str,
            allow_weak: bool, log_url: str | None, log_key: str | None,
            witness_policy_path: Path | None, as_json: bool) -> None:
    """Sign and log a kernel's release, verification and benchmark; keep receipts."""
    out = Output(as_json)

    def body() -> int:
        from client.publish import load_results, results_from_files, run_publish

        separate = (verification_path, benchmark_path, samples_path)
        if results_path is not None and any(separate):
            raise InputError("give either --results or --verification/--benchmark/--samples")
        if results_path is not None:
            results = load_results(results_path)
        elif any(separate):
            results = results_from_files(*separate)
        else:
            results = None
        report = run_publish(kernel_dir, key_path, results, budget, log_url, log_key,
                             TrustedState(), out, passphrase_env=passphrase_env,
                             witness_policy=load_witness_policy(witness_policy_path),
                             allow_weak=allow_weak)

        def render(c: Console) -> None:
            c.print(rows_table(
                f"Published {report['name']} (sha256:{report['subject_sha256'][:16]}…) "
                f"to {report['origin']}",
                ["kind", "index", "tree size", "receipt"],
                [(p["kind"], p["index"], p["tree_size"], p["proof_path"])
                 for p in report["entries"]],
            ))
            c.print("Every inclusion proof and checkpoint signature was verified before the "
                    "receipts were written.")
            c.print(safe(f"What was signed (by key {report['signer'][:16]}…):", "bold"))
            _print_views(c, report["signed"])

        out.result(report, render)
        return 0

    run_guarded(out, body)


# -- verify -------------------------------------------------------------------------------


@click.command()
@click.argument("receipt", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--entry", "entry_path", type=click.Path(path_type=Path, dir_okay=False),
              help="The logged entry (default: RECEIPT with .tlog-proof -> .entry.json).")
@click.option("--log-key", envvar="KTL_LOG_KEY", metavar="KEYSTRING",
              help="The log's note verifier key (required, or $KTL_LOG_KEY).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML: which keys may sign which kernel names.")
@click.option("--source", "source_path", type=click.Path(path_type=Path),
              help="Source file or kernel folder whose digest must match the entry's subject.")
@click.option("--witness", "witness_keys", multiple=True, metavar="KEYSTRING",
              help="A witness's cosignature/v1 verifier key (repeatable).")
@click.option("--witness-threshold", type=click.IntRange(min=0), default=None,
              help="Valid witness cosignatures required (default: 1 when --witness is given).")
@witness_policy_option
@click.option("--log", "log_url", metavar="URL",
              help="Also prove the receipt consistent with the log's latest checkpoint "
                   "(verify stays offline without it, even when $KTL_LOG is set).")
@json_option
def verify(receipt: Path, entry_path: Path | None, log_key: str | None,
           policy_path: Path | None, source_path: Path | None, witness_keys: tuple[str, ...],
           witness_threshold: int | None, witness_policy_path: Path | None,
           log_url: str | None, as_json: bool) -> None:
    """Verify a receipt offline: checkpoint, inclusion, signature, policy, source digest."""
    out = Output(as_json)

    def body() -> int:
        from client.receipts import (
            MAX_ENTRY_FILE_BYTES,
            MAX_PROOF_FILE_BYTES,
            entry_path_for,
            load_witnesses,
            verify_receipt,
        )
        from client.session import connect, prove_receipt_current
        from client.trust import load_verifier

        if not log_key:
            raise InputError("verify needs the log's key: pass --log-key KEYSTRING "
                             "(print it with `ktl log-key` on the log's host)")
        verifier = load_verifier(log_key)
        proof_bytes = read_capped(receipt, MAX_PROOF_FILE_BYTES, "receipt")
        entry_file = entry_path or entry_path_for(receipt)
        entry_bytes = read_capped(entry_file, MAX_ENTRY_FILE_BYTES, "entry file")
        if source_path is not None and not source_path.exists():
            raise InputError(f"source {source_path} does not exist")
        witnesses = load_witnesses(witness_keys)
        threshold = (1 if witnesses else 0) if witness_threshold is None else witness_threshold
        wpolicy = load_witness_policy(witness_policy_path)
        report, cp = verify_receipt(proof_bytes, entry_bytes, verifier,
                                    policy=load_policy(policy_path), source=source_path,
                                    witnesses=witnesses, witness_threshold=threshold,
                                    witness_policy=wpolicy)
        data = report.to_json()
        if log_url:
            try:
                sess = connect(log_url, TrustedState(), log_key, witness_policy=wpolicy)
            except NetworkError as exc:  # say what did verify before the log was tried
                checked = ", ".join(["checkpoint signature", "inclusion proof",
                                     "envelope signature and statement"]
                                    + ["trust policy"] * bool(report.policy)
                                    + ["source digest"] * bool(report.source)
                                    + ["witnesses"] * bool(report.notes))
                raise NetworkError(
                    f"the receipt (entry {report.index}) verified offline ({checked}), but "
                    f"its consistency with the log at {log_url} could not be checked: {exc}"
                ) from exc
            try:
                if sess.origin != cp.checkpoint.origin:
                    raise InputError(f"the log at {log_url} is {sess.origin!r}, but the receipt "
                                     f"is from {cp.checkpoint.origin!r}")
                latest = prove_receipt_current(sess, cp)
            finally:
                sess.close()
            data["consistent_with"] = latest.checkpoint.size

        def render(c: Console) -> None:
            rows: list[tuple[str, Any]] = [
                ("checkpoint signature", f"OK ({report.origin}, size {report.tree_size})"),
                ("inclusion proof", f"OK (entry {report.index}, leaf {report.leaf_hash[:16]}…)"),
                ("envelope signature", "OK (" + ", ".join(k[:16] + "…"
                                                          for k in report.signer_keyids) + ")"),
                ("statement", f"{report.predicate_type}"),
                ("subject", f"{report.subject_name} sha256:{report.subject_sha256}"),
                ("trust policy", report.policy or "not checked (no --policy)"),
                ("source", report.source or "not checked (no --source)"),
                ("witnesses", "; ".join(report.notes) if report.notes
                 else "not checked (no --witness or --witness-policy)"),
            ]
            if data["consistent_with"] is not None:
                rows.append(("log consistency",
                             f"OK (consistent with the log's size {data['consistent_with']})"))
            c.print(kv_table(f"Receipt {receipt}: VERIFIED", rows))

        out.result(data, render)
        return 0

    run_guarded(out, body)


# -- get ----------------------------------------------------------------------------------


_SHOWN_APART = ("statement", "signed", "reproduced")
"""`ktl get`'s fields rendered apart from its key/value table (`reproduced` by
`_print_reproductions`, below it), never as one cell."""


@click.command()
@click.option("--index", required=True, type=click.IntRange(min=0), help="Entry index.")
@click.option("--out", "out_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the entry bytes here and its tlog-proof receipt beside it.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML: name the reproducers it trusts beside their verdicts.")
@log_option
@log_key_option
@witness_policy_option
@json_option
def get(index: int, out_path: Path | None, policy_path: Path | None, log_url: str | None,
        log_key: str | None, witness_policy_path: Path | None, as_json: bool) -> None:
    """Fetch one entry, verify its proof and signature, show what it claims, optionally save
    it as a receipt."""
    out = Output(as_json)

    def body() -> int:
        from client.claims_view import claims_view, signer_phrase
        from client.receipts import PROOF_SUFFIX
        from client.session import connect, fetch_entry, require_url
        from client.state import atomic_write
        from ledger.tlog.proof_bundle import TlogProof

        policy = load_policy(policy_path)
        sess = connect(require_url(log_url), TrustedState(), log_key,
                       witness_policy=load_witness_policy(witness_policy_path))
        _key_note(out, sess.key.how, sess.key.describe())
        try:
            fetched = fetch_entry(sess, index)
            found = None
            if fetched.verified.statement.predicate_type in (BENCHMARK_V1, VERIFICATION_V1):
                from client.claims_view import reproductions_of

                found = reproductions_of(sess, fetched, policy)
        finally:
            sess.close()
        data = fetched.summary()
        if found is not None:
            data["reproduced"] = found.to_json()
        data["statement"] = fetched.verified.statement.to_json()
        if out_path is not None:
            atomic_write(out_path, fetched.entry_bytes)
            name = out_path.name
            stem = name[: -len(".entry.json")] if name.endswith(".entry.json") else name
            proof_path = out_path.with_name(stem + PROOF_SUFFIX)
            proof = TlogProof(index, tuple(fetched.proof), fetched.checkpoint.note_bytes, None)
            atomic_write(proof_path, proof.to_text().encode("utf-8"))
            data["entry_path"], data["proof_path"] = str(out_path), str(proof_path)

        stmt = fetched.verified.statement
        view = claims_view(stmt.predicate_type, stmt.predicate.to_json(),
                           signer_phrase(fetched.verified.signer_keyids, policy))
        if view is not None:
            data["signed"] = view.to_json()
        if stmt.predicate_type == REPRODUCTION_V1:
            data["reproducer"] = signer_phrase(fetched.verified.signer_keyids, policy)

        def render(c: Console) -> None:
            rows = [(k, v) for k, v in data.items() if k not in _SHOWN_APART]
            c.print(kv_table(f"Entry {index} (verified)", rows))
            if view is not None:
                c.print(safe("What was signed:", "bold"))
                _print_views(c, [view.to_json()])
            if found is not None:
                _print_reproductions(c, found)

        out.result(data, render)
        return 0

    run_guarded(out, body)


def _print_reproductions(c: Console, found: ClaimReproductions) -> None:
    """The named reproducers' verdicts first, strangers' muted, and what was cut off."""
    if found.seen:
        c.print(rows_table("Reproductions of this claim", ["entry", "verdict", "by"],
                           [(s.index, s.verdict.upper() if s.trusted else s.verdict, s.by)
                            for s in found.seen],
                           ["" if s.trusted else "dim" for s in found.seen]))
    else:
        c.print(safe("Not reproduced yet (no reproduction entry names this claim)."))
    note = found.strangers_note()
    if note:
        c.print(safe(f"Cut off: {note}.", "bold yellow"))
    c.print(safe(f"Independently: {found.summary()}", "bold"))


def _print_views(c: Console, views: list[dict[str, Any]]) -> None:
    """The tables of `client.claims_view` (as JSON), each with its legend."""
    for v in views:
        c.print(rows_table(v["title"], v["columns"], v["rows"]))
        if v["legend"]:
            c.print(safe(v["legend"], "dim"))


# -- search -------------------------------------------------------------------------------


def _keyid_arg(value: str) -> str:
    if _HEX64.fullmatch(value):
        return value
    path = Path(value)
    if not path.exists():
        raise InputError(f"--key {value!r} is neither a 64-hex keyid nor a public key file")
    from attest import AttestError
    from attest.keys import keyid, load_public_key

    try:
        return keyid(load_public_key(path))
    except AttestError as exc:
        raise InputError(f"--key {value}: not a public key file: {exc}") from exc


_TYPE_ALIASES = {uri.rsplit("/", 2)[-2]: uri for uri in PREDICATE_TYPES}
_GLOB = re.compile(r"[*?\[\]]")


def _search_type(ptype: str) -> str:
    """A predicate type URI from `--type` (a short name or a URI); InputError if unknown."""
    uri = _TYPE_ALIASES.get(ptype, ptype)
    if uri not in PREDICATE_TYPES:
        raise InputError(f"--type {ptype!r} is not a predicate type; use one of "
                         f"{', '.join(_TYPE_ALIASES)} or its full URI")
    return uri


@click.command()
@click.option("--digest", help="Subject sha256 (hex) of a kernel source archive.")
@click.option("--name", help="Kernel name, e.g. acme/matmul-blocked.")
@click.option("--key", "key", help="Signer keyid (hex) or a public key file.")
@click.option("--type", "ptype", help="Predicate type URI or kernel|benchmark|verification|"
                                      "reproduction.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000),
              help="At most this many results.")
@click.option("--unverified", is_flag=True,
              help="List the log's search rows without asking for the proof that the list "
                   "is complete (for a log that commits to no index).")
@click.option("--max-pages", default=DEFAULT_MAX_PAGES, show_default=True,
              type=click.IntRange(1, None),
              help="Read the index's list in at most this many pages; a longer list is not "
                   "proven complete (exit 4).")
@click.option("--page-size", default=MAX_PAGE, show_default=True,
              type=click.IntRange(1, MAX_PAGE), help="Entries of the list asked for a page.")
@log_option
@log_key_option
@json_option
def search(digest: str | None, name: str | None, key: str | None, ptype: str | None, limit: int,
           unverified: bool, max_pages: int, page_size: int, log_url: str | None,
           log_key: str | None, as_json: bool) -> None:
    """Find entries by subject digest, kernel name, signer key or predicate type.

    The list is proven complete against the log's signed checkpoint (its committed
    index) and the log's search rows must agree with it; --unverified skips that."""
    out = Output(as_json)

    def body() -> int:
        from client.api import LogClient
        from client.models import SearchHit
        from client.session import require_url
        from client.vindex import check_listing

        if not any((digest, name, key, ptype)):
            raise InputError("search needs one of --digest, --name, --key, --type")
        if name is not None and _GLOB.search(name):
            raise InputError(f"--name {name!r}: no globs; the log's index matches exact kernel "
                             "names (to list a vendor's kernels, search by --key with its key)")
        if digest is not None and not _HEX64.fullmatch(digest.removeprefix("sha256:")):
            raise InputError("--digest must be a sha256 digest (64 lowercase hex digits)")
        keyid = _keyid_arg(key) if key else None
        pt = _search_type(ptype) if ptype else None
        filters = {"digest": digest.removeprefix("sha256:") if digest else None,
                   "name": name, "keyid": keyid, "predicate_type": pt}
        given = {k: v for k, v in filters.items() if v is not None}
        field, value = next(iter(given.items()))  # the log searches by one field ...
        rest = {k: v for k, v in given.items() if k != field}  # ... the rest filter here
        proved, published = ((None, 0) if unverified
                             else _proved_list(out, log_url, log_key, (field, value),
                                               Paging(page_size, max_pages)))

        def keep(hit: SearchHit) -> bool:
            return all(
                (k == "digest" and hit.subject_sha256 == v)
                or (k == "name" and hit.subject_name == v)
                or (k == "keyid" and v in hit.keyids)
                or (k == "predicate_type" and hit.predicate_type == v)
                for k, v in rest.items()
            )

        rows: list[dict[str, Any]] = []
        listed: list[int] = []
        read_all = False
        with LogClient(require_url(log_url)) as log:
            cursor: int | None = None
            for _ in range(1000):
                page = log.search(**{field: value}, cursor=cursor, limit=100)
                listed.extend(h.index for h in page.results)
                rows.extend(h.to_json() for h in page.results if keep(h))
                if page.next_cursor is None or not page.results:
                    read_all = True
                    break
                if len(rows) >= limit:
                    break
                if cursor is not None and page.next_cursor <= cursor:
                    raise InputError("the log's search cursor did not advance; stopping")
                cursor = page.next_cursor
        if proved is not None:  # the listing must hold every entry the index proves, no other
            # (below the size the log published before: a witnessed log lists no further)
            reach = published if read_all else min(published, max(listed, default=-1) + 1)
            check_listing(proved, listed, up_to=reach)
        rows = rows[:limit]

        def render(c: Console) -> None:
            if proved is not None:
                c.print(safe(f"Search {proved.summary()}."))
            how = ("the list is proven complete" if proved is not None
                   else "unverified index, not proven complete")
            c.print(rows_table(
                f"{plural(len(rows), 'entry', 'entries')} ({how}; "
                "`ktl get --index N` verifies each entry)",
                ["index", "name", "type", "subject sha256", "signers"],
                [(r["index"], r["subject_name"], r["predicate_type"].rsplit("/", 2)[-2],
                  r["subject_sha256"][:16] + "…", ", ".join(k[:12] for k in r["keyids"]))
                 for r in rows],
            ))

        out.result({"results": rows,
                    "complete": None if proved is None else proved.to_json()}, render)
        return 0

    run_guarded(out, body)


def _proved_list(out: Output, log_url: str | None, log_key: str | None,
                 search: tuple[str, str], paging: Paging) -> tuple[CompleteList, int]:
    """The list of entries naming the search key (field, value), verified against a
    trusted checkpoint page by page (as `paging` says, progress on stderr), and the
    tree size the log announced before (its search lists at least that far)."""
    from client.session import connect, require_url
    from client.vindex import index_key_for, verified_lookup

    sess = connect(require_url(log_url), TrustedState(), log_key)
    try:
        _key_note(out, sess.key.how, sess.key.describe())
        with out.progress("proving the list complete, entries read", None) as advance_to:
            shown = replace(paging, progress=lambda _pages, n: advance_to(n, None))
            proved = verified_lookup(sess, index_key_for(*search), shown)
        return proved, sess.info.tree_size
    finally:
        sess.close()


# -- log-info -----------------------------------------------------------------------------


@click.command("log-info")
@log_option
@log_key_option
@witness_policy_option
@json_option
def log_info(log_url: str | None, log_key: str | None, witness_policy_path: Path | None,
             as_json: bool) -> None:
    """Show the log's identity and verified checkpoint; prove it consistent with what we trust."""
    out = Output(as_json)

    def body() -> int:
        from client.session import EmptyLog, connect, latest_checkpoint, require_url

        sess = connect(require_url(log_url), TrustedState(), log_key,
                       witness_policy=load_witness_policy(witness_policy_path))
        _key_note(out, sess.key.how, sess.key.describe())
        data: dict[str, Any] = {
            "origin": sess.origin,
            "verifier_key": sess.key.key,
            "key_source": sess.key.how,
            "tree_size": 0,
            "root_hash": None,
            "trusted_before": None,
            "consistency": "empty log",
            "max_entry_bytes": sess.info.max_entry_bytes,
            "max_blob_bytes": sess.info.max_blob_bytes,
            "max_batch": sess.info.max_batch,
            "reproduce": None if sess.info.reproduce is None else dict(sess.info.reproduce),
            "checkpoint": None,
        }
        try:
            cp, rec = latest_checkpoint(sess)
            data.update(tree_size=cp.checkpoint.size, root_hash=cp.checkpoint.root_hash.hex(),
                        trusted_before=rec.trusted_size, consistency=rec.outcome,
                        checkpoint=cp.note_bytes.decode("utf-8"))
            data["witnesses"] = cosigners(cp, sess.verifier, sess.witness_policy)
        except EmptyLog:
            pass
        finally:
            sess.close()

        def render(c: Console) -> None:
            c.print(kv_table(f"Log {sess.origin}", [
                (k, v["summary"] if k == "witnesses" else v)
                for k, v in data.items() if k != "checkpoint"]))

        out.result(data, render)
        return 0

    run_guarded(out, body)


# -- monitor ------------------------------------------------------------------------------


@click.command()
@click.option("--since", type=click.IntRange(min=0), help="Start at this index (default: resume).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Trust policy TOML; entries it rejects are violations.")
@click.option("--state", "state_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Monitor state file (default: $KTL_HOME/monitor/<log>.json).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Verify entry signatures in this many processes (catch-up on many cores).")
@click.option("--follow", is_flag=True,
              help="Keep watching: a new pass every --interval seconds, until a violation "
                   "(exit 1) or Ctrl-C.")
@click.option("--interval", default=30.0, show_default=True, type=click.FloatRange(0.1, 86400),
              help="Seconds between passes with --follow.")
@click.option("--passes", type=click.IntRange(min=1),
              help="With --follow: stop after this many passes (default: no limit).")
@log_option
@log_key_option
@witness_policy_option
@json_option
def monitor(since: int | None, policy_path: Path | None, state_path: Path | None, jobs: int,
            follow: bool, interval: float, passes: int | None,
            log_url: str | None, log_key: str | None, witness_policy_path: Path | None,
            as_json: bool) -> None:
    """Tail the log through its tiles: verify everything, report releases, reproductions
    (with their signers) and violations; exit 1 on a violation or a refutation by a
    reproducer the policy trusts.

    One pass checks everything new since the last pass (the state file) up to the log's
    current checkpoint; --follow repeats it. With --json, each pass prints one JSON line.
    """
    out = Output(as_json)
    if passes is not None and not follow:
        raise click.UsageError("--passes goes with --follow")

    def body() -> int:
        from client.monitor import default_state_path, run_monitor
        from client.session import connect, require_url

        trusted = TrustedState()
        policy = load_policy(policy_path)
        sess = connect(require_url(log_url), trusted, log_key,
                       witness_policy=load_witness_policy(witness_policy_path))
        _key_note(out, sess.key.how, sess.key.describe())
        path = state_path or default_state_path(trusted, sess.origin)
        done = 0
        try:
            while True:
                with out.progress("verifying entries", None) as advance:
                    report = run_monitor(sess.log, sess.verifier, sess.origin, sess.trusted, path,
                                         policy=policy, since=since if done == 0 else None,
                                         on_progress=advance, jobs=jobs, quorum=sess.quorum)
                done += 1
                _monitor_result(out, report, path)
                if report.violations or report.refutations:
                    return 1
                if not follow or (passes is not None and done >= passes):
                    return 0
                time.sleep(interval)
        finally:
            sess.close()

    run_guarded(out, body)


def _monitor_result(out: Output, report: MonitorReport, path: Path) -> None:
    """One pass: a table for people, one JSON line (as `--help` promises) with --json."""
    data = report.to_json()
    data["state_file"] = str(path)

    def render(c: Console) -> None:
        if report.rejudged:
            c.print(safe("The policy changed since the last pass: every entry was judged again "
                         "under it, from index 0.", "bold yellow"))
        if report.start_index >= report.tree_size:
            c.print(safe(f"No new entries in {report.origin} since the last pass (tree size "
                         f"{report.tree_size})."))
        else:
            c.print(safe(f"Checked entries {report.start_index}..{report.tree_size - 1} of "
                         f"{report.origin}: {plural(report.entries_checked, 'entry', 'entries')}"
                         ", every tile verified against the signed checkpoint."))
        if report.findings:
            c.print(rows_table("Findings", ["index", "kind", "name", "detail"],
                               [(f.index, f.kind.upper() if f.kind in ("violation", "refutation")
                                 else f.kind, f.name, f.detail) for f in report.findings]))
        c.print(safe(f"{plural(len(report.violations), 'violation')}, "
                     f"{plural(len(report.refutations), 'refutation')} by trusted reproducers. "
                     f"State saved to {path}."))

    out.result(data, render, one_line=True)


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    for cmd in (publish, verify, get, search, log_info, monitor):
        group.add_command(cmd)

