"""``odfd sql -o json --proof`` prints a signed answer that an independent verifier accepts, and
``odfd sql --verify`` checks a saved one: on this node, on another node that lacks its dataset,
and through a real server's ``/verify``; each tampering is named on one line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from odfd.app.node import Node
from odfd.config import NodeConfig, ServerConfig
from odfd.server.app import running
from odfd.server.query_api import query_api_mount
from storage.workspace import Workspace
from tests.cli.helpers import run
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.query_api import verifier
from tests.query_api.datasets import grow
from tests.verifier.builders import root_with_slices

SQL = 'SELECT "offset", value FROM nums ORDER BY "offset"'


async def workspace_with_nums(root: Path, *, with_data: bool = True, with_key: bool = True) -> None:
    async with await Workspace.init(root) as workspace:
        if with_key:
            workspace.keys.node_key()
        if with_data:
            await root_with_slices(workspace, "nums", [[1, 2, 3]])


@pytest.fixture
def node_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    asyncio.run(workspace_with_nums(root))
    return root


def _answer(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, Any]:
    code, out, err = run(capsys, "sql", "-c", SQL, "-o", "json", "--proof", "--root", str(root))
    assert code == 0, err
    answer = json.loads(out)
    assert isinstance(answer, dict)
    return answer


def _verify(
    capsys: pytest.CaptureFixture[str], root: Path, answer: dict[str, Any], *extra: str
) -> tuple[int, str]:
    path = root.parent / "answer.json"
    path.write_text(json.dumps(answer))
    code, out, err = run(capsys, "sql", "--verify", str(path), "--root", str(root), *extra)
    return code, out + err


def test_a_proven_answer_holds_for_an_independent_verifier_and_for_verify(
    capsys: pytest.CaptureFixture[str], node_root: Path
) -> None:
    answer = _answer(capsys, node_root)
    verifier.check(answer)  # canonical JSON, sha3-256, ed25519: nothing of odfd's
    assert answer["output"]["data"] == [
        {"offset": 0, "value": 1},
        {"offset": 1, "value": 2},
        {"offset": 2, "value": 3},
    ]
    [pinned] = answer["input"]["datasets"]
    assert pinned["alias"] == "nums" and pinned["blockHash"].startswith("f1620")
    did = answer["proof"]["verificationMethod"]

    saved = node_root.parent / "saved.json"
    code, out, err = run(
        capsys,
        "sql",
        "-c",
        SQL,
        "-o",
        "json",
        "--proof",
        "--output-path",
        str(saved),
        "--root",
        str(node_root),
    )
    assert (code, out) == (0, "")
    assert json.loads(saved.read_text()) == answer  # ed25519 signatures are deterministic

    code, out = _verify(capsys, node_root, answer)
    assert code == 0
    assert out.strip() == (
        "OK: " + str(node_root.parent / "answer.json") + f": signed by {did}; its output matches "
        "the query re-executed at the pinned blocks by this node"
    )

    # new data does not dispute an answer made before it: the blocks are pinned
    async def more() -> None:
        async with await Workspace.open(node_root) as workspace:
            await grow(workspace, "nums", [4])

    asyncio.run(more())
    assert _verify(capsys, node_root, answer)[0] == 0


@pytest.mark.parametrize(
    ("tamper", "failure"),
    [
        (
            lambda a: a["output"]["data"][0].update(value=100),
            "the answer on its own: VerificationFailed::OutputMismatch: ",
        ),
        (
            lambda a: a["input"].update(skip=1),
            "the answer on its own: InvalidRequest::InputHash: The commitment is invalid",
        ),
        (
            lambda a: a["proof"].update(proofValue="u" + "A" * 86),
            "the answer on its own: InvalidRequest::BadSignature: ",
        ),
    ],
)
def test_a_tampered_answer_fails_naming_the_check(
    capsys: pytest.CaptureFixture[str], node_root: Path, tamper: Any, failure: str
) -> None:
    answer = _answer(capsys, node_root)
    tamper(answer)
    code, out = _verify(capsys, node_root, answer)
    assert code == 1
    assert out.count("\n") == 1
    assert out.startswith("FAILED: ") and failure in out, out


def test_a_node_without_the_dataset_says_so(
    capsys: pytest.CaptureFixture[str], node_root: Path, tmp_path: Path
) -> None:
    answer = _answer(capsys, node_root)
    other = tmp_path / "other"
    asyncio.run(workspace_with_nums(other, with_data=False, with_key=False))
    code, out = _verify(capsys, other, answer)
    assert code == 1
    dataset_id = answer["input"]["datasets"][0]["id"]
    assert out.startswith("FAILED: ")
    assert (
        "re-executed by this node: VerificationFailed::DatasetNotFound: Unable to reproduce"
    ) in out
    assert f"(dataset_id {dataset_id})" in out


@contextmanager
def serving(root: Path, config: ServerConfig | None = None) -> Iterator[str]:
    """The node at ``root`` served (query API) on a thread of its own, at the URL yielded."""

    async def serve(publish: Publish[str], stop: asyncio.Event) -> None:
        async with await Workspace.open(root) as workspace:
            settings = config or ServerConfig(address="127.0.0.1", port=0)
            node = Node(workspace, NodeConfig(server=settings))
            async with running(workspace, settings, mounts=[query_api_mount(node)]) as server:
                publish(server.url)
                await stop.wait()

    with serve_in_thread("verify-remote", serve) as url:
        yield url


def test_a_remote_node_re_executes_through_its_verify(
    capsys: pytest.CaptureFixture[str], node_root: Path, tmp_path: Path
) -> None:
    answer = _answer(capsys, node_root)
    client = tmp_path / "client"
    asyncio.run(workspace_with_nums(client, with_data=False, with_key=False))
    with serving(node_root) as remote:
        code, out = _verify(capsys, client, answer, "--remote", remote)
        assert code == 0, out
        assert out.strip().endswith(f"re-executed at the pinned blocks by {remote}")

        tampered = json.loads(json.dumps(answer))
        tampered["input"]["datasets"][0]["blockHash"] = "f1620" + "00" * 32
        code, out = _verify(capsys, client, tampered, "--remote", remote)
        assert code == 1
        # a changed pin changes the input: caught before the remote is asked
        assert "the answer on its own: InvalidRequest::InputHash" in out

    with serving(client) as lacking:
        code, out = _verify(capsys, client, answer, "--remote", lacking)
        assert code == 1
        assert (
            f"re-executed by {lacking}: VerificationFailed::DatasetNotFound: Unable to reproduce"
        ) in out


def test_a_saved_verify_request_is_checked_as_its_answer_is(
    capsys: pytest.CaptureFixture[str], node_root: Path, tmp_path: Path
) -> None:
    """The body ``/verify`` takes (the answer without its output, as the README saves it) is
    checked by ``--verify`` here and through another node, with the same verdicts."""
    answer = _answer(capsys, node_root)
    request = {key: value for key, value in answer.items() if key != "output"}
    code, out = _verify(capsys, node_root, request)
    assert (code, out.strip()) == (
        0,
        "OK: " + str(node_root.parent / "answer.json") + ": signed by "
        f"{answer['proof']['verificationMethod']}; its output matches the query re-executed at "
        "the pinned blocks by this node",
    )
    client = tmp_path / "client"
    asyncio.run(workspace_with_nums(client, with_data=False, with_key=False))
    with serving(node_root) as remote:
        code, out = _verify(capsys, client, request, "--remote", remote)
        assert code == 0, out

    skipped = json.loads(json.dumps(request))
    skipped["input"]["skip"] = 1
    code, out = _verify(capsys, node_root, skipped)
    assert code == 1
    assert out.startswith("FAILED: ") and "the answer on its own: InvalidRequest::InputHash" in out
    forged = json.loads(json.dumps(request))
    forged["commitment"]["outputHash"] = "f1620" + "00" * 32
    code, out = _verify(capsys, node_root, forged)
    assert code == 1 and "the answer on its own: InvalidRequest::BadSignature" in out


def test_argument_and_file_errors(capsys: pytest.CaptureFixture[str], node_root: Path) -> None:
    code, _, err = run(capsys, "sql", "-c", SQL, "--proof", "--root", str(node_root))
    assert (code, err.strip()) == (
        2,
        "error: --proof prints the signed answer as JSON: add -o json",
    )
    bad = node_root.parent / "bad.json"
    bad.write_text('{"output": {}}')
    code, _, err = run(capsys, "sql", "--verify", str(bad), "--root", str(node_root))
    assert code == 2
    assert f"{bad}: not an answer with a proof: missing field `input`" in err
