-- Accounts of people and programs on this node (odfd/app/accounts.py) and the access tokens
-- issued to them. A password is kept only as an argon2 hash; a token only as the SHA-256 of its
-- text (tokens are long random strings, so a fast hash suffices and lookups stay indexed).
CREATE TABLE accounts (
    name          TEXT PRIMARY KEY,    -- the account name, lowercased
    id            TEXT NOT NULL UNIQUE, -- did:odf:… derived from the name
    display_name  TEXT NOT NULL,
    email         TEXT,
    avatar_url    TEXT,
    password_hash TEXT,                -- argon2id; NULL: the account cannot log in with a password
    is_admin      INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL
);

CREATE TABLE access_tokens (
    id           TEXT PRIMARY KEY,     -- short public id, shown by `odfd account token list`
    account      TEXT NOT NULL REFERENCES accounts (name) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE, -- hex SHA-256 of the token's text
    label        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT,                 -- NULL: never expires
    revoked_at   TEXT
);
CREATE INDEX access_tokens_account ON access_tokens (account);
