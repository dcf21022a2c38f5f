-- The daemon's bookkeeping: mirrors and their schedule, every sync attempt, audit reports, and
-- declarative resources (RFC-018). Unlike `datasets`, none of this can be rebuilt from the
-- dataset folders: `odfd repair` keeps it.

-- A dataset kept in sync with a remote source (and optionally pushed on to targets).
CREATE TABLE mirrors (
    name                  TEXT PRIMARY KEY COLLATE NOCASE,  -- local dataset alias
    source                TEXT NOT NULL,                    -- URL pulled from
    targets               TEXT NOT NULL DEFAULT '[]',       -- JSON list of URLs pushed to
    interval_seconds      REAL NOT NULL,
    paused                INTEGER NOT NULL DEFAULT 0,
    resource_id           TEXT,                             -- the Mirror resource managing it, if any
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    next_run_at           TEXT,                             -- when the scheduler runs it next
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    last_attempt_at       TEXT,
    last_success_at       TEXT,
    last_error            TEXT,
    source_head           TEXT,                             -- source head when last seen
    source_sequence       INTEGER,                          -- its sequence number, when known
    source_cid            TEXT,                             -- what an ipns:// source resolved to
    pinned_cid            TEXT,                             -- the dataset folder pinned in IPFS
    target_state          TEXT NOT NULL DEFAULT '{}'        -- JSON {target: {"head", "remote", "error"}}
);

-- Every sync attempt of a mirror and how it ended.
CREATE TABLE sync_attempts (
    id                INTEGER PRIMARY KEY,
    mirror            TEXT NOT NULL,
    source            TEXT NOT NULL,
    dataset_id        TEXT,
    started_at        TEXT NOT NULL,
    finished_at       TEXT NOT NULL,
    duration_seconds  REAL NOT NULL,
    outcome           TEXT NOT NULL CHECK (outcome IN ('unchanged', 'updated', 'failed', 'cancelled')),
    old_head          TEXT,
    new_head          TEXT,
    source_head       TEXT,
    blocks            INTEGER NOT NULL DEFAULT 0,
    objects           INTEGER NOT NULL DEFAULT 0,
    bytes             INTEGER NOT NULL DEFAULT 0,
    pushes            TEXT NOT NULL DEFAULT '[]',       -- JSON [{target, blocks, error}]
    error             TEXT
);
CREATE INDEX sync_attempts_by_mirror ON sync_attempts (mirror, id);
CREATE INDEX sync_attempts_by_time ON sync_attempts (started_at);

-- Audit reports (the verifier's JSON document, stored as is).
CREATE TABLE audits (
    id            INTEGER PRIMARY KEY,
    dataset_id    TEXT NOT NULL,
    alias         TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('integrity', 'full')),
    trigger       TEXT NOT NULL,                    -- sync, transform, schedule, manual
    head          TEXT,
    started_at    TEXT NOT NULL,
    finished_at   TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'cannot-verify', 'skipped', 'error')),
    summary       TEXT NOT NULL,                    -- why, in one line
    report        TEXT                              -- JSON report (NULL when the audit could not run)
);
CREATE INDEX audits_by_dataset ON audits (dataset_id, id);

-- Declarative resources (RFC-018): the desired state as applied, and what controllers made of it.
CREATE TABLE resources (
    id          TEXT PRIMARY KEY,                   -- UUID v4, assigned on first apply
    schema      TEXT NOT NULL,                      -- $schema type URI
    name        TEXT NOT NULL,
    labels      TEXT NOT NULL DEFAULT '{}',         -- JSON
    annotations TEXT NOT NULL DEFAULT '{}',         -- JSON
    spec        TEXT NOT NULL,                      -- JSON, canonical (sorted keys)
    generation  INTEGER NOT NULL,
    status      TEXT NOT NULL,                      -- JSON ResourceStatus
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (schema, name)
);
