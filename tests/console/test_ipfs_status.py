"""What the console's node page says about the IPFS node (``odfd.app.ipfs_status``), against a
real Kubo node and a port nothing listens on."""

from __future__ import annotations

import socket

from odfd.app.ipfs_status import ipfs_status
from storage.ipfs_client import IpfsClient
from tests.fixtures.ipfs_node import LocalIpfsNode


async def test_a_running_node_answers_who_it_is(ipfs_node: LocalIpfsNode) -> None:
    status = await ipfs_status(ipfs_node.api_multiaddr)
    known = await IpfsClient(ipfs_node.api_multiaddr).id()
    assert status.error is None and status.api == ipfs_node.api_multiaddr
    assert status.peer_id == known.peer_id and status.agent == known.agent_version
    assert 0 < len(status.addresses) <= 5
    assert set(status.addresses) <= set(known.addresses)


async def test_a_node_not_running_is_offline_with_why() -> None:
    with socket.socket() as sock:  # a port just freed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = f"/ip4/127.0.0.1/tcp/{port}/http"
    status = await ipfs_status(api)
    assert status.api == api and status.peer_id is None and status.addresses == ()
    assert status.error is not None and "no IPFS node reachable" in status.error
