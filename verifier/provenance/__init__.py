"""Why- and where-provenance of derivative rows (``odfd provenance``).

A recorded transaction is re-executed on its recorded input slices with every input row tagged by
its (input, offset); the transform's SQL is rewritten (``rewrite``) so the tags flow to the output
rows; each answer is then checked by running the original transform on the witness rows alone
(``check``). ``trace`` follows the witnesses down to root datasets and the ingest that added them.
"""
