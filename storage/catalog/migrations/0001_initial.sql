-- The node's index of what it holds. Rebuildable from the dataset folders (odfd repair) except
-- for remotes and sync bookkeeping, which repair keeps.

CREATE TABLE datasets (
    id              TEXT PRIMARY KEY,                   -- did:odf:fed01...
    alias           TEXT NOT NULL UNIQUE COLLATE NOCASE,-- as in info/alias; names compare case-insensitively
    kind            TEXT NOT NULL CHECK (kind IN ('root', 'derivative')),
    head            TEXT,                               -- multibase of refs/head
    head_sequence   INTEGER,                            -- sequence number of the head block
    created_at      TEXT NOT NULL,                      -- RFC 3339 UTC
    updated_at      TEXT NOT NULL
);

-- Named remote repositories (e.g. `odfd repo add NAME URL`).
CREATE TABLE remotes (
    name            TEXT PRIMARY KEY COLLATE NOCASE,
    url             TEXT NOT NULL,
    created_at      TEXT NOT NULL
);

-- A dataset's pull/push remote copies, mirrored from the dataset's info/config.
CREATE TABLE remote_aliases (
    dataset_id      TEXT NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('pull', 'push')),
    remote_ref      TEXT NOT NULL,
    PRIMARY KEY (dataset_id, kind, remote_ref)
);

-- What we last knew about a dataset's copy at a remote.
CREATE TABLE sync_state (
    dataset_id              TEXT NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    remote                  TEXT NOT NULL,              -- URL of the remote copy
    last_remote_head        TEXT,                       -- remote head when last seen
    last_remote_seen_at     TEXT,
    last_synced_local_head  TEXT,                       -- local head both sides had after the last sync
    last_synced_at          TEXT,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (dataset_id, remote)
);

-- Transfers in progress, so an interrupted pull/push resumes instead of starting over.
-- dataset_id is not a foreign key: the first pull of a dataset starts before it is registered.
CREATE TABLE transfers (
    id              INTEGER PRIMARY KEY,
    dataset_id      TEXT NOT NULL,
    remote          TEXT NOT NULL,
    direction       TEXT NOT NULL CHECK (direction IN ('pull', 'push')),
    base_head       TEXT,                               -- local head when the transfer began
    target_head     TEXT NOT NULL,                      -- head being transferred
    objects_total   INTEGER,
    objects_done    INTEGER NOT NULL DEFAULT 0,
    bytes_done      INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (dataset_id, remote, direction)
);
