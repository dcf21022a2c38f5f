-- Signed heads (docs/signed-heads.md): per dataset, the newest owner-signed head this node has
-- seen, whether it signed it itself or received it with a pull. A pull refuses a signed head
-- older than this one (rollback), another head signed at the same instant (fork), and a missing or
-- invalid signature once a dataset has been seen signed. Not an index: `odfd repair` keeps it
-- (and re-reads each folder's refs/head.sig, keeping whichever is newer).
CREATE TABLE signed_heads (
    dataset_id       TEXT PRIMARY KEY,
    head             TEXT NOT NULL,
    sequence_number  INTEGER NOT NULL,
    signed_at_nanos  INTEGER NOT NULL,   -- the owner's signing time, ns since the Unix epoch
    document         BLOB NOT NULL,      -- the refs/head.sig document as received
    source           TEXT,               -- URL it came from; NULL when signed on this node
    received_at      TEXT NOT NULL
);

-- A mirror's freeze bound: how long its source may go without a newer signed head before the
-- mirror reports a freeze. No row: [sync] freeze_after.
CREATE TABLE mirror_freeze_bounds (
    mirror          TEXT PRIMARY KEY COLLATE NOCASE,
    freeze_seconds  REAL NOT NULL
);
