"""``GET /{dataset}/pull``: the Smart Transfer Protocol pull flow, server side.

Request -> transfer plan (or ``InvalidInterval`` when the client's head is not an ancestor of
ours), metadata request -> the blocks as one tarball, then any number of object requests ->
signed download URLs, until the client closes. The plan and the metadata answer are made
together, before the plan goes out, and kept for the next peer asking for the same interval
(``odfd.server.pull_answers``).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlencode

from aiohttp import web

from odfd.app.pull_intervals import InvalidInterval, metadata_text, read_interval
from odfd.server.pull_answers import PullAnswer
from odfd.server.state import STATE_KEY, ServerState
from odfd.server.websocket import ServerChannel, accept, check_version
from odfd.sync.errors import TransferFlowError
from protocol.errors import OdfError
from protocol.transfer.smart import messages as m

log = logging.getLogger(__name__)


async def handle_pull(request: web.Request) -> web.StreamResponse:
    state: ServerState = request.app[STATE_KEY]
    dataset_path = request.match_info["dataset"]
    record = await state.require(dataset_path, request)
    check_version(request)
    dataset = state.datasets.open(record)
    ws = await accept(request)
    channel = ServerChannel(ws, f"pull of {record.alias}")
    try:
        await _pull_flow(channel, state, request, dataset_path, dataset, str(record.id))
    except TransferFlowError as err:
        log.info("%s", err)
    except OdfError as err:
        log.error("pull of %s failed: %s", record.alias, err)
        await channel.close_with_error(
            m.TransferError.internal("Pull", "MetadataRequest", str(err))
        )
    await channel.finish()
    return ws


async def _pull_flow(
    channel: ServerChannel,
    state: ServerState,
    request: web.Request,
    dataset_path: str,
    dataset,
    scope: str,
) -> None:
    pull = await channel.receive(m.DatasetPullRequest.from_json, "DatasetPullRequest")
    if pull is None:
        return
    head = pull.stop_at or await dataset.chain.head()
    if head is None:
        await channel.close_with_error(
            m.TransferError.internal("Pull", "InitialRequest", "dataset has no head")
        )
        return
    key = (scope, head, pull.begin_after, pull.force_update_if_diverged)
    answer = state.pull_answers.get(key)
    if answer is None:
        try:
            interval = await read_interval(
                dataset.chain, head, pull.begin_after, pull.force_update_if_diverged
            )
        except InvalidInterval:
            await channel.send(
                m.DatasetPullResponse(
                    error=m.TransferError("InvalidInterval", head=head, tail=pull.begin_after)
                )
            )
            return
        # Packed before the plan goes out: the client asks for the blocks as soon as it has it.
        answer = PullAnswer(interval.plan, await asyncio.to_thread(metadata_text, interval))
        state.pull_answers.put(key, answer)
    await channel.send(m.DatasetPullResponse(answer.plan))
    if (
        await channel.receive(m.DatasetPullMetadataRequest.from_json, "DatasetPullMetadataRequest")
        is None
    ):
        return
    await channel.send_text(answer.metadata)
    base = state.dataset_url(request, dataset_path)
    while True:
        objects = await channel.receive(
            m.DatasetPullObjectsTransferRequest.from_json, "DatasetPullObjectsTransferRequest"
        )
        if objects is None:
            return
        strategies = []
        for file in objects.object_files:
            folder = "data" if file.object_type == "DataSlice" else "checkpoints"
            query, expires = state.signer.sign("GET", scope, folder, file.physical_hash, file.size)
            url = f"{base}{folder}/{file.physical_hash.to_multibase()}?{urlencode(query)}"
            strategies.append(
                m.PullObjectTransferStrategy(
                    file,
                    m.TransferUrl(url, ((m.VERSION_HEADER, str(m.PROTOCOL_VERSION)),), expires),
                )
            )
        await channel.send(m.DatasetPullObjectsTransferResponse(tuple(strategies)))
