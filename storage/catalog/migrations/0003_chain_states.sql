-- The last saved chain state of each dataset (storage/chain/saved_state.py): the hashes of the
-- few blocks its state at `head` is made of, so a new process restores it instead of validating
-- the whole chain. A cache: a missing, stale or unreadable row only costs recomputing the state,
-- and `odfd repair` neither reads nor rebuilds it. No foreign key to `datasets`: a pull saves the
-- state of a new dataset before the catalog registers it, and a row is only ever used for the
-- head it names (which determines the whole chain).
CREATE TABLE chain_states (
    dataset_id  TEXT PRIMARY KEY,
    head        TEXT NOT NULL,
    state       BLOB NOT NULL,
    updated_at  TEXT NOT NULL
);
