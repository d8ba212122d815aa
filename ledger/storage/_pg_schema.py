"""The PostgreSQL schema and its migrations (one list, applied in order, version recorded).

Versioned like the SQLite schema (`ledger.storage._schema`); the two lists are separate
because the dialects differ (bytea, bigint, no WITHOUT ROWID). Migrations run in one
transaction under an advisory lock, so frontends starting together migrate once.
"""

from __future__ import annotations

from typing import Any

from ledger.storage._schema import SUMMARY_RECOMPUTE
from ledger.storage._types import StorageError

#: Advisory lock keys (one namespace per log database).
MIGRATE_LOCK = 0x6B746C_01  # "ktl" 1
INTEGRATE_LOCK = 0x6B746C_02  # "ktl" 2

#: Each migration moves the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE entries (
        idx BIGINT PRIMARY KEY,
        leaf_hash BYTEA NOT NULL UNIQUE,
        data BYTEA NOT NULL,
        predicate_type TEXT NOT NULL,
        subject_name TEXT NOT NULL,
        subject_sha256 TEXT NOT NULL,
        keyids TEXT NOT NULL,
        integrated_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX entries_predicate_type ON entries (predicate_type, idx);
    CREATE TABLE subjects (
        idx BIGINT NOT NULL REFERENCES entries (idx),
        pos INTEGER NOT NULL,
        name TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        PRIMARY KEY (idx, pos)
    );
    CREATE INDEX subjects_sha256 ON subjects (sha256, idx);
    CREATE INDEX subjects_name ON subjects (name, idx);
    CREATE TABLE signers (
        idx BIGINT NOT NULL REFERENCES entries (idx),
        keyid TEXT NOT NULL,
        PRIMARY KEY (idx, keyid)
    );
    CREATE INDEX signers_keyid ON signers (keyid, idx);
    CREATE TABLE tiles (
        level INTEGER NOT NULL,
        idx BIGINT NOT NULL,
        hashes BYTEA NOT NULL,
        nodes BYTEA,
        PRIMARY KEY (level, idx)
    );
    CREATE TABLE checkpoints (
        size BIGINT PRIMARY KEY,
        root_hash BYTEA NOT NULL,
        note BYTEA NOT NULL,
        created DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE blobs (
        digest TEXT PRIMARY KEY,
        size BIGINT NOT NULL,
        data BYTEA NOT NULL,
        created DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE files (
        path TEXT PRIMARY KEY,
        data BYTEA NOT NULL
    )
    """,
    # v2: checkpoints published with the witness cosignatures that met the log's policy.
    """
    CREATE TABLE cosigned (
        size BIGINT PRIMARY KEY,
        root_hash BYTEA NOT NULL,
        note BYTEA NOT NULL,
        created DOUBLE PRECISION NOT NULL
    )
    """,
    # v3: the shared queue. Frontends queue verified submissions (bytes, facts, and a MAC
    # under a key derived from the log key, which the database never sees); the one integrator
    # takes them in ticket order and, in the transaction that commits them, records each
    # ticket's outcome (index, duplicate, covering size, or why it was refused) for the
    # waiting frontend to collect.
    """
    CREATE TABLE queue (
        ticket BIGSERIAL PRIMARY KEY,
        data BYTEA NOT NULL,
        facts TEXT NOT NULL,
        mac BYTEA NOT NULL,
        queued_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE outcomes (
        ticket BIGINT PRIMARY KEY,
        idx BIGINT,
        duplicate BOOLEAN NOT NULL,
        size BIGINT NOT NULL,
        error TEXT,
        done_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX outcomes_done_at ON outcomes (done_at)
    """,
    # v4: per-digest summaries, kept at integration (see the SQLite schema's v4).
    """
    CREATE TABLE digest_summaries (
        sha256 TEXT NOT NULL,
        predicate_type TEXT NOT NULL,
        entries BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        last_idx BIGINT NOT NULL,
        PRIMARY KEY (sha256, predicate_type)
    );
    INSERT INTO digest_summaries (sha256, predicate_type, entries, bytes, last_idx)
    """ + SUMMARY_RECOMPUTE.format(where=""),
)

SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: Any) -> int:
    """The schema version recorded in the database (0 for a new database)."""
    row = conn.execute("SELECT to_regclass('schema_version')").fetchone()
    if row is None or row[0] is None:
        return 0
    got = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if got is None else int(got[0])


def migrate(conn: Any) -> int:
    """Bring the schema up to date in one transaction; returns the version reached."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        version = current_version(conn)
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"the database has schema version {version}, newer than this ktl "
                f"understands ({SCHEMA_VERSION}); upgrade ktl"
            )
        if version == SCHEMA_VERSION:
            return version
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for step in MIGRATIONS[version:]:
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
    return SCHEMA_VERSION
