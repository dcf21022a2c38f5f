-- Files an integrity audit found intact (storage/catalog/audit_files.py): the file's stat when
-- it was read and its verified physical hash, sealed by an HMAC under a node-local key. An
-- incremental audit skips a file only while its stat and seal still match; a full audit
-- re-checks everything. A cache: a missing or damaged row only costs re-checking that file.
CREATE TABLE audit_files (
    dataset_id     TEXT NOT NULL,
    file           TEXT NOT NULL,
    size           INTEGER NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    ctime_ns       INTEGER NOT NULL,
    inode          INTEGER NOT NULL,
    physical_hash  TEXT NOT NULL,
    seal           BLOB NOT NULL,
    verified_at    TEXT NOT NULL,
    PRIMARY KEY (dataset_id, file)
);
