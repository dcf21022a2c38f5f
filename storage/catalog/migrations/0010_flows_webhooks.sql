-- RFC-018 flows and webhook targets: what they did.
--
-- `webhook_deliveries`: one row per delivery to a WebhookTarget (`message_id` is the
-- Standard Webhooks `webhook-id`, the same on every retry), its state (`pending`, `delivered`,
-- `failed`), how many attempts it took, the last HTTP status and error.
CREATE TABLE webhook_deliveries (
    message_id  TEXT PRIMARY KEY,
    target_id   TEXT NOT NULL,
    target_name TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_status INTEGER,
    error       TEXT,
    created_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX webhook_deliveries_by_target ON webhook_deliveries (target_id, created_at);

-- `flow_runs`: one row per run of a Flow: what fired it, its state (`running`, `succeeded`,
-- `failed`), when it started and ended, and why it failed.
CREATE TABLE flow_runs (
    run_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    flow_id     TEXT NOT NULL,
    flow_name   TEXT NOT NULL,
    trigger     TEXT NOT NULL,
    state       TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    error       TEXT
);
CREATE INDEX flow_runs_by_flow ON flow_runs (flow_id, run_id);
