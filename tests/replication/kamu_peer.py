"""A Smart Transfer Protocol client and server written from the reference, not from odfd.

Every message is a plain JSON value built and checked against kamu-cli's serde types
(``src/adapter/http/src/smart_protocol/messages.rs``: snake_case fields, ``Result`` as
``{"Ok"|"Err": …}``, externally tagged enums, ``Vec<u8>`` as an array of numbers), and the flows
follow its ``ws_tungstenite_client.rs`` and ``axum_server_{push,pull}_protocol.rs``, including
``--force``: the sending side walks from its head back to the other side's head and, when that
head is not in its history, sends the whole chain from the Seed (``ignore_missing_tail``); the
receiving side then makes its head the sender's. A repository is a dataset folder in the spec's
layout (``blocks/``, ``data/``, ``checkpoints/``, ``refs/head``), read and written as files.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from protocol.codec.flatbuffers import decode_block
from protocol.model import AddData, ExecuteTransform, MetadataBlock, Seed

VERSION = 1
VERSION_HEADER = "x-odf-smtp-version"
TAR_GZ = "application/tar+gzip"


class InvalidInterval(Exception):
    """The tail is not an ancestor of the head (the reference's ``InvalidIntervalError``)."""


# --- messages.rs, field by field ----------------------------------------------------------------


def expect_keys(value: Any, keys: set[str], what: str) -> dict[str, Any]:
    assert isinstance(value, dict) and set(value) == keys, f"{what}: {value!r} is not {keys}"
    return value


def transfer_plan(blocks: list[tuple[str, bytes, MetadataBlock]]) -> dict[str, int]:
    objects = records = object_bytes = 0
    for _, _, block in blocks:
        event = block.event
        if isinstance(event, (AddData, ExecuteTransform)):
            if event.new_data is not None:
                objects += 1
                object_bytes += event.new_data.size
                records += (
                    event.new_data.offset_interval.end - event.new_data.offset_interval.start + 1
                )
            if event.new_checkpoint is not None:
                objects += 1
                object_bytes += event.new_checkpoint.size
    return {
        "num_blocks": len(blocks),
        "num_objects": objects,
        "num_records": records,
        "bytes_in_raw_blocks": sum(len(data) for _, data, _ in blocks),
        "bytes_in_raw_objects": object_bytes,
    }


def check_plan(value: Any) -> dict[str, int]:
    plan = expect_keys(
        value,
        {"num_blocks", "num_objects", "num_records", "bytes_in_raw_blocks", "bytes_in_raw_objects"},
        "TransferPlan",
    )
    assert all(isinstance(v, int) and v >= 0 for v in plan.values())
    return plan


def object_files(block: MetadataBlock) -> list[dict[str, Any]]:
    """``ObjectFileReference`` values of a block (``object_type``, ``physical_hash``, ``size``)."""
    event = block.event
    files = []
    if isinstance(event, (AddData, ExecuteTransform)):
        if event.new_data is not None:
            files.append(
                {
                    "object_type": "DataSlice",
                    "physical_hash": str(event.new_data.physical_hash),
                    "size": event.new_data.size,
                }
            )
        if event.new_checkpoint is not None:
            files.append(
                {
                    "object_type": "Checkpoint",
                    "physical_hash": str(event.new_checkpoint.physical_hash),
                    "size": event.new_checkpoint.size,
                }
            )
    return files


def check_object_file(value: Any) -> dict[str, Any]:
    file = expect_keys(value, {"object_type", "physical_hash", "size"}, "ObjectFileReference")
    assert file["object_type"] in ("DataSlice", "Checkpoint")
    return file


def check_transfer_url(value: Any) -> dict[str, Any]:
    url = expect_keys(value, {"url", "headers", "expires_at"}, "TransferUrl")
    for row in url["headers"]:
        expect_keys(row, {"name", "value"}, "HeaderRow")
    return url


def batch(blocks: list[tuple[str, bytes, MetadataBlock]]) -> dict[str, Any]:
    """A ``MetadataBlocksBatch``: a gzipped tar of the blocks, oldest first, named by hash."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for hash, data, _ in blocks:
            info = tarfile.TarInfo(hash)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    payload = gzip.compress(raw.getvalue())
    return {
        "num_blocks": len(blocks),
        "media_type": TAR_GZ,
        "encoding": "raw",
        "payload": list(payload),
    }


def unbatch(value: Any) -> list[tuple[str, bytes]]:
    blocks = expect_keys(value, {"num_blocks", "media_type", "encoding", "payload"}, "Batch")
    assert blocks["media_type"] == TAR_GZ and blocks["encoding"] == "raw"
    with tarfile.open(fileobj=io.BytesIO(bytes(blocks["payload"])), mode="r:gz") as tar:
        out = []
        for member in tar.getmembers():
            extracted = tar.extractfile(member)
            assert extracted is not None
            out.append((member.name, extracted.read()))
    assert len(out) == blocks["num_blocks"]
    return out


# --- a repository: one dataset folder -----------------------------------------------------------


@dataclass
class Repo:
    root: Path

    def head(self) -> str | None:
        path = self.root / "refs" / "head"
        return path.read_text() if path.exists() else None

    def set_head(self, hash: str) -> None:
        (self.root / "refs").mkdir(parents=True, exist_ok=True)
        (self.root / "refs" / "head").write_text(hash)

    def block(self, hash: str) -> tuple[str, bytes, MetadataBlock] | None:
        path = self.root / "blocks" / hash
        if not path.exists():
            return None
        data = path.read_bytes()
        return hash, data, decode_block(data)

    def interval(
        self, head: str | None, tail: str | None, ignore_missing_tail: bool
    ) -> list[tuple[str, bytes, MetadataBlock]]:
        """Blocks after ``tail`` up to ``head`` (none in an empty repo), oldest first
        (``iter_blocks_interval``)."""
        newest_first = []
        hash: str | None = head
        while hash is not None and hash != tail:
            found = self.block(hash)
            assert found is not None, f"block {hash} missing"
            newest_first.append(found)
            prev = found[2].prev_block_hash
            hash = None if prev is None else str(prev)
        if hash is None and tail is not None and not ignore_missing_tail:
            raise InvalidInterval(f"{tail} is not an ancestor of {head}")
        return newest_first[::-1]

    def has_object(self, file: dict[str, Any]) -> bool:
        return self.object_path(file).exists()

    def object_path(self, file: dict[str, Any]) -> Path:
        folder = "data" if file["object_type"] == "DataSlice" else "checkpoints"
        return self.root / folder / file["physical_hash"]

    def append(self, blocks: list[tuple[str, bytes]], force: bool) -> str:
        """Stores the blocks and moves ``head`` to the last one; without ``force`` they must
        continue the current head (``SetRefCheckRefMode::ForceUpdateIfDiverged``)."""
        current = self.head()
        first = decode_block(blocks[0][1])
        if not force and current is not None and str(first.prev_block_hash) != current:
            known = {hash for hash, _ in blocks}
            assert current in known, "diverged"
        for hash, data in blocks:
            (self.root / "blocks").mkdir(parents=True, exist_ok=True)
            (self.root / "blocks" / hash).write_bytes(data)
        self.set_head(blocks[-1][0])
        return blocks[-1][0]


def seed_conflicts(first: bytes, repo: Repo) -> bool:
    """``ensure_seed_not_in_conflict``: a chain sent from a Seed must be of the same dataset."""
    block = decode_block(first)
    if not isinstance(block.event, Seed):
        return False
    ours = repo.interval(repo.head(), None, True)[0][2].event if repo.head() else None
    return isinstance(ours, Seed) and ours.dataset_id != block.event.dataset_id


# --- the client ---------------------------------------------------------------------------------


async def _send(ws: aiohttp.ClientWebSocketResponse, value: Any) -> None:
    await ws.send_str(json.dumps(value))


async def _receive(ws: aiohttp.ClientWebSocketResponse) -> Any:
    frame = await ws.receive(timeout=30)
    if frame.type == aiohttp.WSMsgType.TEXT:
        return json.loads(frame.data)
    if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
        return json.loads(frame.extra) if frame.extra else {"closed": frame.data}
    raise AssertionError(f"unexpected frame {frame.type}")


def _ws_url(base: str, dataset: str, operation: str) -> str:
    return base.replace("http://", "ws://") + f"{dataset}/{operation}"


def _headers(token: str | None) -> dict[str, str]:
    headers = {VERSION_HEADER: str(VERSION)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def client_push(
    session: aiohttp.ClientSession,
    base: str,
    dataset: str,
    repo: Repo,
    dst_head: str | None,
    *,
    force: bool,
    token: str | None,
) -> dict[str, Any]:
    """``push_protocol_client_flow``; returns what happened, every answer checked."""
    src_head = repo.head()
    assert src_head is not None
    try:
        blocks = repo.interval(src_head, dst_head, ignore_missing_tail=force)
    except InvalidInterval:
        return {"result": "InvalidInterval"}  # diverged or behind, and not forced
    if not blocks:
        return {"result": "UpToDate"}
    async with session.ws_connect(_ws_url(base, dataset, "push"), headers=_headers(token)) as ws:
        await _send(
            ws,
            {
                "current_head": dst_head,
                "transfer_plan": transfer_plan(blocks),
                "force_update_if_diverged": force,
                "visibility_for_created_dataset": "Private",
            },
        )
        answer = await _receive(ws)
        if "Ok" not in answer:
            return {"result": "Refused", "answer": answer}
        expect_keys(answer, {"Ok"}, "DatasetPushResponse")
        expect_keys(answer["Ok"], set(), "DatasetPushRequestAccepted")
        await _send(ws, {"new_blocks": batch(blocks)})
        answer = await _receive(ws)
        if "Ok" not in answer:
            return {"result": "Refused", "answer": answer}
        expect_keys(answer["Ok"], set(), "DatasetPushMetadataAccepted")
        files = [f for _, _, block in blocks for f in object_files(block)]
        await _send(ws, {"object_files": files, "is_truncated": False})
        answer = await _receive(ws)
        expect_keys(answer, {"Ok"}, "DatasetPushObjectsTransferResponse")
        accepted = expect_keys(
            answer["Ok"], {"object_transfer_strategies"}, "DatasetPushObjectsTransferAccepted"
        )
        uploaded = 0
        strategies = accepted["object_transfer_strategies"]
        assert len(strategies) == len(files)
        for strategy in strategies:
            expect_keys(strategy, {"object_file", "push_strategy", "upload_to"}, "Strategy")
            file = check_object_file(strategy["object_file"])
            assert strategy["push_strategy"] in ("SkipUpload", "HttpUpload")
            if strategy["push_strategy"] == "HttpUpload":
                url = check_transfer_url(strategy["upload_to"])
                headers = {row["name"]: row["value"] for row in url["headers"]}
                body = repo.object_path(file).read_bytes()
                async with session.put(url["url"], data=body, headers=headers) as response:
                    assert response.status < 300, await response.text()
                uploaded += 1
        await _send(ws, {"details": "Complete"})
        await _send(ws, {})
        while True:
            answer = await _receive(ws)
            if answer != {}:  # a progress request that crossed our completion: ignore it
                continue
            break
        return {"result": "Updated", "uploaded": uploaded, "skipped": len(files) - uploaded}


async def client_pull(
    session: aiohttp.ClientSession, base: str, dataset: str, repo: Repo, *, force: bool
) -> dict[str, Any]:
    """``pull_protocol_client_flow`` into ``repo`` (an existing dataset folder)."""
    dst_head = repo.head()
    async with session.ws_connect(_ws_url(base, dataset, "pull"), headers=_headers(None)) as ws:
        await _send(
            ws, {"begin_after": dst_head, "stop_at": None, "force_update_if_diverged": force}
        )
        answer = await _receive(ws)
        if "Err" in answer:
            expect_keys(answer["Err"], {"InvalidInterval"}, "DatasetPullRequestError")
            expect_keys(answer["Err"]["InvalidInterval"], {"head", "tail"}, "InvalidInterval")
            return {"result": "Diverged"}
        success = expect_keys(answer["Ok"], {"transfer_plan"}, "DatasetPullSuccessResponse")
        plan = check_plan(success["transfer_plan"])
        if plan["num_blocks"] == 0:
            return {"result": "UpToDate"}
        await _send(ws, {})
        answer = expect_keys(await _receive(ws), {"blocks"}, "DatasetMetadataPullResponse")
        blocks = unbatch(answer["blocks"])
        assert len(blocks) == plan["num_blocks"]
        if force and seed_conflicts(blocks[0][1], repo):
            return {"result": "OverwriteSeedBlock"}
        files = [
            f
            for _, data in blocks
            for f in object_files(decode_block(data))
            if not repo.has_object(f)
        ]
        if files:
            await _send(ws, {"object_files": files})
            answer = await _receive(ws)
            response = expect_keys(
                answer, {"object_transfer_strategies"}, "DatasetPullObjectsTransferResponse"
            )
            for strategy in response["object_transfer_strategies"]:
                expect_keys(strategy, {"object_file", "pull_strategy", "download_from"}, "Strategy")
                assert strategy["pull_strategy"] == "HttpDownload"
                file = check_object_file(strategy["object_file"])
                url = check_transfer_url(strategy["download_from"])
                headers = {row["name"]: row["value"] for row in url["headers"]}
                async with session.get(url["url"], headers=headers) as download:
                    assert download.status == 200
                    path = repo.object_path(file)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(await download.read())
        new_head = repo.append(blocks, force)
        return {"result": "Updated", "new_head": new_head, "num_blocks": len(blocks)}


# --- the server ---------------------------------------------------------------------------------


def server_app(repos: dict[str, Repo]) -> web.Application:
    """Simple Transfer (refs, blocks, objects; PUT for uploads) and Smart Transfer endpoints."""

    def repo_of(request: web.Request) -> Repo:
        repo = repos.get(request.match_info["dataset"])
        if repo is None:
            raise web.HTTPNotFound()
        return repo

    async def get_file(request: web.Request) -> web.StreamResponse:
        repo = repo_of(request)
        folder, name = request.match_info["folder"], request.match_info["name"]
        path = repo.root / folder / name
        # The reference serves the head ref only (no signed heads: an odfd signature file left in
        # the folder would be stale once this peer moves the head).
        if not path.is_file() or (folder == "refs" and name != "head"):
            raise web.HTTPNotFound()
        return web.Response(body=path.read_bytes())

    async def put_file(request: web.Request) -> web.Response:
        repo = repo_of(request)
        folder, name = request.match_info["folder"], request.match_info["name"]
        (repo.root / folder).mkdir(parents=True, exist_ok=True)
        (repo.root / folder / name).write_bytes(await request.read())
        return web.Response(status=200)

    def url_of(request: web.Request, folder: str, hash: str) -> dict[str, Any]:
        base = f"http://{request.host}/{request.match_info['dataset']}"
        return {"url": f"{base}/{folder}/{hash}", "headers": [], "expires_at": None}

    async def pull(request: web.Request) -> web.WebSocketResponse:
        repo = repo_of(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        message = expect_keys(
            json.loads((await ws.receive()).data),
            {"begin_after", "stop_at", "force_update_if_diverged"},
            "DatasetPullRequest",
        )
        head = message["stop_at"] or repo.head()
        try:
            blocks = repo.interval(
                head, message["begin_after"], message["force_update_if_diverged"]
            )
        except InvalidInterval:
            error = {"InvalidInterval": {"head": head, "tail": message["begin_after"]}}
            await ws.send_str(json.dumps({"Err": error}))
            await ws.close()
            return ws
        await ws.send_str(json.dumps({"Ok": {"transfer_plan": transfer_plan(blocks)}}))
        async for frame in ws:
            value = json.loads(frame.data)
            if value == {}:
                await ws.send_str(json.dumps({"blocks": batch(blocks)}))
                continue
            request_files = expect_keys(value, {"object_files"}, "ObjectsRequest")["object_files"]
            strategies = [
                {
                    "object_file": check_object_file(f),
                    "pull_strategy": "HttpDownload",
                    "download_from": url_of(
                        request,
                        "data" if f["object_type"] == "DataSlice" else "checkpoints",
                        f["physical_hash"],
                    ),
                }
                for f in request_files
            ]
            await ws.send_str(json.dumps({"object_transfer_strategies": strategies}))
        return ws

    async def push(request: web.Request) -> web.WebSocketResponse:
        repo = repo_of(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        message = expect_keys(
            json.loads((await ws.receive()).data),
            {
                "current_head",
                "transfer_plan",
                "force_update_if_diverged",
                "visibility_for_created_dataset",
            },
            "DatasetPushRequest",
        )
        check_plan(message["transfer_plan"])
        force = message["force_update_if_diverged"]
        if message["current_head"] != repo.head():
            error = {
                "InvalidHead": {
                    "actual_head": message["current_head"],
                    "expected_head": repo.head(),
                }
            }
            await ws.send_str(json.dumps({"Err": error}))
            await ws.close()
            return ws
        await ws.send_str(json.dumps({"Ok": {}}))
        metadata = expect_keys(
            json.loads((await ws.receive()).data), {"new_blocks"}, "DatasetPushMetadataRequest"
        )
        blocks = unbatch(metadata["new_blocks"])
        if force and blocks and seed_conflicts(blocks[0][1], repo):
            await ws.send_str(json.dumps({"Err": {"SeedBlockOverwriteRestricted": {}}}))
            await ws.close()
            return ws
        await ws.send_str(json.dumps({"Ok": {}}))
        while blocks:
            objects = expect_keys(
                json.loads((await ws.receive()).data),
                {"object_files", "is_truncated"},
                "DatasetPushObjectsTransferRequest",
            )
            strategies = []
            for f in map(check_object_file, objects["object_files"]):
                folder = "data" if f["object_type"] == "DataSlice" else "checkpoints"
                skip = repo.has_object(f)
                strategies.append(
                    {
                        "object_file": f,
                        "push_strategy": "SkipUpload" if skip else "HttpUpload",
                        "upload_to": None if skip else url_of(request, folder, f["physical_hash"]),
                    }
                )
            await ws.send_str(json.dumps({"Ok": {"object_transfer_strategies": strategies}}))
            while True:
                progress = expect_keys(
                    json.loads((await ws.receive()).data), {"details"}, "ProgressResponse"
                )
                if progress["details"] == "Complete":
                    break
            if not objects["is_truncated"]:
                break
        expect_keys(json.loads((await ws.receive()).data), set(), "DatasetPushComplete")
        if blocks:
            repo.append(blocks, force)
        await ws.send_str(json.dumps({}))
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_get("/{dataset}/pull", pull)
    app.router.add_get("/{dataset}/push", push)
    app.router.add_get("/{dataset}/{folder:refs|blocks|data|checkpoints}/{name}", get_file)
    app.router.add_put("/{dataset}/{folder:data|checkpoints}/{name}", put_file)
    return app
