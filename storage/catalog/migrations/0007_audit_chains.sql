-- The newest block of each dataset's chain whose whole history an integrity audit verified, and
-- what an incremental audit needs to resume from it (verifier/chain_memory.py), sealed by an HMAC
-- under the same node-local key as audit_files (storage/catalog/audit_chains.py). A cache: a
-- missing or damaged row only costs checking the whole chain again.
CREATE TABLE audit_chains (
    dataset_id   TEXT PRIMARY KEY,
    head         TEXT NOT NULL,
    record       BLOB NOT NULL,
    seal         BLOB NOT NULL,
    verified_at  TEXT NOT NULL
);
