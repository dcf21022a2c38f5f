"""What the server keeps between requests (token grants, the policy's stamp, dataset rows and
the dataset list, each kept until the catalog changes) never outlives a change: a revoked token
is refused by the very next request, and a dataset that becomes private (or public) is hidden
(or shown) by the very next query."""

from __future__ import annotations

from odfd.app.accounts import add_account, create_token, revoke_token
from tests.query_api.conftest import READ_TOKEN, Served
from tests.query_api.datasets import POPULATION, PRIVATE

OPENED = "opened.nums"


def test_a_revoked_token_is_refused_at_once(served: Served) -> None:
    served.run(add_account(served.node, "carol", password=None))
    issued = served.run(create_token(served.node, "carol"))
    sql = f'select count(*) as n from "{POPULATION}"'
    for _ in range(3):  # the grant is looked up, then kept
        assert served.call("POST", "/query", {"query": sql}, token=issued.secret).status == 200
        head = served.call("GET", f"/{POPULATION}/refs/head", token=issued.secret)
        assert head.status == 200
    served.run(revoke_token(served.node, "carol", issued.record.id))
    refused = served.call("POST", "/query", {"query": sql}, token=issued.secret)
    assert refused.status == 401
    assert served.call("GET", f"/{POPULATION}/refs/head", token=issued.secret).status == 401


def test_a_dataset_made_private_is_hidden_at_once(served: Served) -> None:
    workspace = served.node.workspace
    public = f'select count(*) as n from "{OPENED}"'
    private = f'select count(*) as n from "{PRIVATE}"'
    served.run(workspace.rename_dataset(PRIVATE, OPENED))  # out of [server] private
    try:
        for _ in range(2):
            shown = served.call("POST", "/query", {"query": public})
            assert shown.body == {"output": {"data": [{"n": 2}], "dataFormat": "JsonAoS"}}
        assert served.call("GET", f"/{OPENED}/tail").status == 200
    finally:
        served.run(workspace.rename_dataset(OPENED, PRIVATE))  # private again
    hidden = served.call("POST", "/query", {"query": private})
    assert hidden.status == 400 and "not found" in hidden.body["message"]
    assert served.call("GET", f"/{PRIVATE}/tail").status == 404
    assert served.call("GET", f"/{PRIVATE}/refs/head").status == 404
    shown = served.call("POST", "/query", {"query": private}, token=READ_TOKEN)
    assert shown.body["output"]["data"] == [{"n": 2}]
