-- The dataset graph's index (storage/graph.py): each derivative dataset's inputs, the datasets its
-- transform reads, in the transform's order, as of the head they were read at. Written whenever a
-- derivative's head moves or a dataset is added, imported, adopted or pulled; `odfd repair`
-- rebuilds it. A row whose head is not its dataset's head any more, or a derivative without a row
-- (every derivative of a catalog older than this table), is read again from that dataset's chain
-- the first time the graph is asked for, and written back: so the index fills itself on an
-- existing workspace, and a missed write costs one chain read, never a wrong answer.
CREATE TABLE dataset_inputs (
    dataset_id  TEXT PRIMARY KEY REFERENCES datasets (id) ON DELETE CASCADE,
    head        TEXT NOT NULL,
    inputs      TEXT NOT NULL   -- the input dataset ids, separated by single spaces
);
