-- The audit trail of writes (odfd/app/write_log.py): who pushed, ingested, pulled, applied,
-- deleted, reset or compacted what, when, by which way in, and how the dataset's head moved.
-- Rows are only ever added; a deleted dataset's rows stay.
CREATE TABLE write_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT NOT NULL,
    action      TEXT NOT NULL,   -- push, ingest, pull, add, apply, delete, reset, compact
    account     TEXT NOT NULL,   -- the acting account's name
    via         TEXT NOT NULL,   -- cli (with the OS user), http, daemon
    target      TEXT NOT NULL,   -- the dataset's alias, or Kind:name of a resource
    dataset_id  TEXT,            -- did:odf:… when a dataset was written
    old_head    TEXT,
    new_head    TEXT
);
CREATE INDEX write_log_dataset ON write_log (dataset_id, seq);
