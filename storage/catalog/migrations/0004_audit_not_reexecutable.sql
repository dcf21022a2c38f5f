-- Audits get the status 'not-re-executable': integrity held, but a transform names an engine this
-- node does not have (Flink, RisingWave...). SQLite cannot change a CHECK constraint in place, so
-- the table is rebuilt with its rows.
CREATE TABLE audits_new (
    id            INTEGER PRIMARY KEY,
    dataset_id    TEXT NOT NULL,
    alias         TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('integrity', 'full')),
    trigger       TEXT NOT NULL,                    -- sync, transform, schedule, manual
    head          TEXT,
    started_at    TEXT NOT NULL,
    finished_at   TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'cannot-verify', 'not-re-executable', 'skipped', 'error')),
    summary       TEXT NOT NULL,                    -- why, in one line
    report        TEXT                              -- JSON report (NULL when the audit could not run)
);
INSERT INTO audits_new SELECT * FROM audits;
DROP TABLE audits;
ALTER TABLE audits_new RENAME TO audits;
CREATE INDEX audits_by_dataset ON audits (dataset_id, id);
