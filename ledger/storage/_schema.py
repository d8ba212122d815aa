"""The SQLite schema and its migrations (one list, applied in order, version recorded)."""

from __future__ import annotations

import sqlite3

from ledger.storage._types import StorageError

# Random keys (leaf hashes, subject digests) are indexed by their first 8 bytes as an
# integer: a third of the size of the full key, so a batch dirties fewer index pages
# (the WAL volume per entry is what limits sequencing speed); lookups compare the
# full value.

def key64(digest: bytes) -> int:
    """The index key of a random digest: its first 8 bytes as a signed integer."""
    return int.from_bytes(digest[:8], "big", signed=True)


def sha_key(hex_digest: str) -> int:
    """The index key of a subject digest (0 for what is no hex digest)."""
    try:
        return key64(bytes.fromhex(hex_digest[:16]))
    except ValueError:
        return 0


#: The digest summaries recomputed from the entries (migration v4 and `ktl repair
#: --summaries`): rows of (digest, predicate type, entries, bytes, last index) for the
#: subjects `where` selects (a WHERE clause on `subjects`, or nothing).
SUMMARY_RECOMPUTE = """
    SELECT d.sha256, e.predicate_type, COUNT(*), SUM(LENGTH(e.data)), MAX(e.idx)
    FROM (SELECT DISTINCT idx, sha256 FROM subjects {where}) AS d JOIN entries AS e ON e.idx = d.idx
    GROUP BY d.sha256, e.predicate_type
"""

#: Each migration moves the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE entries (
        idx INTEGER PRIMARY KEY,
        leaf_key INTEGER NOT NULL,
        leaf_hash BLOB NOT NULL,
        data BLOB NOT NULL,
        predicate_type TEXT NOT NULL,
        subject_name TEXT NOT NULL,
        subject_sha256 TEXT NOT NULL,
        keyids TEXT NOT NULL,
        integrated_at REAL NOT NULL
    );
    CREATE INDEX entries_leaf_key ON entries (leaf_key);
    CREATE INDEX entries_predicate_type ON entries (predicate_type, idx);
    CREATE TABLE subjects (
        idx INTEGER NOT NULL REFERENCES entries (idx),
        pos INTEGER NOT NULL,
        name TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        sha_key INTEGER NOT NULL,
        PRIMARY KEY (idx, pos)
    ) WITHOUT ROWID;
    CREATE INDEX subjects_sha_key ON subjects (sha_key, idx);
    CREATE INDEX subjects_name ON subjects (name, idx);
    CREATE TABLE signers (
        idx INTEGER NOT NULL REFERENCES entries (idx),
        keyid TEXT NOT NULL,
        PRIMARY KEY (idx, keyid)
    ) WITHOUT ROWID;
    CREATE INDEX signers_keyid ON signers (keyid, idx);
    CREATE TABLE tiles (
        level INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        hashes BLOB NOT NULL,
        PRIMARY KEY (level, idx)
    ) WITHOUT ROWID;
    CREATE TABLE checkpoints (
        id INTEGER PRIMARY KEY,
        size INTEGER NOT NULL UNIQUE,
        root_hash BLOB NOT NULL,
        note BLOB NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE blobs (
        digest TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        data BLOB NOT NULL,
        created REAL NOT NULL
    );
    """,
    # v2: the interior hashes of every full tile (tree levels 8t+1 .. 8t+7), so that
    # proofs read stored hashes instead of re-hashing up to 255 nodes per tile.
    """
    ALTER TABLE tiles ADD COLUMN nodes BLOB
    """,
    # v3: checkpoints published with the witness cosignatures that met the log's policy.
    """
    CREATE TABLE cosigned (
        size INTEGER PRIMARY KEY,
        root_hash BLOB NOT NULL,
        note BLOB NOT NULL,
        created REAL NOT NULL
    )
    """,
    # v4: per-digest summaries (entries, bytes and the newest index per predicate type),
    # kept at integration so a page about a digest reads one row per type, not its entries
    # (issue 26 row 3). Keyed by the full digest: an 8-byte prefix is cheap to collide.
    """
    CREATE TABLE digest_summaries (
        sha256 TEXT NOT NULL,
        predicate_type TEXT NOT NULL,
        entries INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        last_idx INTEGER NOT NULL,
        PRIMARY KEY (sha256, predicate_type)
    ) WITHOUT ROWID;
    INSERT INTO digest_summaries (sha256, predicate_type, entries, bytes, last_idx)
    """ + SUMMARY_RECOMPUTE.format(where=""),
)

SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database (0 for a new database)."""
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if row is None:
        return 0
    got = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if got is None else int(got[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date in one transaction; returns the version reached.

    A database already at this version is only read: opening a log (every worker does, and
    gunicorn starts a new one whenever one dies) must work while its disk is full."""
    if current_version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        version = current_version(conn)
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"the database has schema version {version}, newer than this ktl "
                f"understands ({SCHEMA_VERSION}); upgrade ktl"
            )
        for step in MIGRATIONS[version:]:
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
            conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION
