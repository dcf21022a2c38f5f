"""The views of datasets the query API keeps between queries: by dataset and block, at most
so many, and only for a block the dataset holds."""

from __future__ import annotations

from odfd.app.answers import _Views
from protocol.identity import Multihash
from tests.query_api.conftest import Served
from tests.query_api.datasets import GROWING, POPULATION


def test_views_are_kept_by_block_up_to_the_limit(served: Served) -> None:
    workspace = served.node.workspace
    population = served.run(workspace.resolve(POPULATION))
    growing = served.run(workspace.resolve(GROWING))
    assert population.head is not None and growing.head is not None
    views = _Views(size=1)

    first = served.run(views.view(workspace, population.id, population.head))
    assert first.head == population.head
    assert views.holds(population.id, population.head)
    assert served.run(views.view(workspace, population.id, population.head)) is first  # kept

    absent = Multihash.from_digest_sha3_256(b"no such block")
    at_head = served.run(views.view(workspace, population.id, absent))
    assert at_head.head == population.head  # the dataset lacks the block: its head, not kept
    assert not views.holds(population.id, absent)
    assert views.holds(population.id, population.head)

    served.run(views.view(workspace, growing.id, growing.head))
    assert views.holds(growing.id, growing.head)
    assert not views.holds(population.id, population.head)  # the limit is one view
