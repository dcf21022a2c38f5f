-- RFC-018 references and ownership between resources.
--
-- `resource_references`: each reference a resource's spec makes to another resource (at `path`,
-- e.g. `spec.config.apiKey`), as written (`target_schema`, `target_name` = `[account/]name`) and
-- resolved (`target_id`), with the value it names within a SecretSet or VariableSet
-- (`target_key`, e.g. `apiKey` of `SecretSet:feed#apiKey`): `target_id` is NULL while the target does not exist (dangling references are allowed,
-- RFC-018), set when it is created, then kept, so a later rename of the target keeps the link and
-- a new resource taking the old name does not capture it.
CREATE TABLE resource_references (
    resource_id   TEXT NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    path          TEXT NOT NULL,
    target_schema TEXT NOT NULL,
    target_name   TEXT,
    target_id     TEXT,
    target_key    TEXT,
    PRIMARY KEY (resource_id, path)
);
CREATE INDEX resource_references_by_name ON resource_references (target_schema, target_name)
    WHERE target_id IS NULL;

-- `owner_id`: the resource that made this one (RFC-018 `ownerReference`); deleting the owner
-- deletes what it owns, transitively.
ALTER TABLE resources ADD COLUMN owner_id TEXT REFERENCES resources (id) ON DELETE CASCADE;
