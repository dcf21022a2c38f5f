"""Resources that name a dataset by alias follow it: ``odfd rename`` rewrites the alias in every
``Relations`` entry, ``Flow`` target and ``Dataset`` resource naming it (the roles and visibility
stay with the dataset), and ``odfd delete`` removes them (a dataset later created under the alias
inherits nothing); each change is in the audit trail."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from odfd.app.datasets import rename_dataset
from odfd.app.node import open_node
from odfd.app.resource_datasets import FOLLOWED
from odfd.app.write_log import writes_to
from storage.catalog.resources import ResourceTable
from storage.errors import StorageError
from tests.cli.helpers import MANIFESTS, run

MQTT = "test.root.mqtt"
OTHER = "test.root.ethereum"

RELATIONS = f"""\
$schema: Relations
headers: {{name: team}}
spec:
  relations:
    - {{subject: Account:alice, relation: role, value: maintainer, object: Dataset:{MQTT}}}
    - {{subject: Account:bob, relation: role, value: reader, object: Dataset:{OTHER}}}
  attributes:
    - {{object: Dataset:{MQTT}, name: allowPublicRead, value: false}}
    - {{object: {{type: Dataset, name: {MQTT}}}, name: allowAnonymousRead, value: false}}
    - {{object: Dataset:{OTHER}, name: allowAnonymousRead, value: false}}
---
$schema: Relations
headers: {{name: mqtt-private}}
spec:
  attributes:
    - {{object: {{type: Dataset, name: {MQTT}}}, name: allowPublicRead, value: false}}
---
$schema: Flow
headers: {{name: hourly}}
spec:
  target: Dataset:{MQTT}
  triggers: [{{kind: Schedule, cron: "0 * * * *"}}]
  tasks: [{{kind: WebhookCall, target: com.example.hook}}]
---
$schema: Flow
headers: {{name: everything}}
spec:
  target: Dataset:%
  triggers: [{{kind: Schedule, cron: "0 * * * *"}}]
  tasks: [{{kind: WebhookCall, target: com.example.hook}}]
"""


def _apply(capsys: pytest.CaptureFixture[str], root: Path, manifest: Path) -> tuple[int, str]:
    code, _, err = run(capsys, "apply", "--root", str(root), "-f", str(manifest))
    return code, err


@pytest.fixture
def ws(workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    manifest = tmp_path / "relations.yaml"
    manifest.write_text(RELATIONS)
    code, err = _apply(capsys, workspace_root, manifest)
    assert code == 0, err
    return workspace_root


def _access(capsys: pytest.CaptureFixture[str], root: Path, alias: str) -> dict[str, list[str]]:
    code, out, err = run(capsys, "access", "--root", str(root), alias)
    assert code == 0, err
    _, _, *rows = out.splitlines()
    return {who: cells for who, *cells in (re.split(r"\s{2,}", row) for row in rows)}


def _get(capsys: pytest.CaptureFixture[str], root: Path, kind: str) -> dict[str, dict]:
    code, out, err = run(capsys, "get", kind, "--root", str(root), "-o", "json")
    assert code == 0, err
    documents = json.loads(out)
    documents = documents if isinstance(documents, list) else documents.get("items", [documents])
    return {d["headers"]["name"]: d for d in documents}


def _objects(document: dict) -> list[str]:
    spec = document["spec"]
    found = []
    for entry in [*spec.get("relations", []), *spec.get("attributes", [])]:
        target = entry["object"]
        found.append(target if isinstance(target, str) else f"Dataset:{target['name']}")
    return found


def _private(table: dict[str, list[str]]) -> None:
    assert table["(anonymous)"][0] == "no"
    assert table["alice"][:4] == ["yes", "yes", "yes", "no"]


def test_rename_keeps_roles_and_visibility_with_the_dataset(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _private(_access(capsys, ws, MQTT))
    code, _, err = run(capsys, "rename", "--root", str(ws), MQTT, "mqtt2")
    assert code == 0, err
    _private(_access(capsys, ws, "mqtt2"))

    relations = _get(capsys, ws, "relations")
    assert _objects(relations["team"]) == [
        "Dataset:mqtt2",
        f"Dataset:{OTHER}",
        "Dataset:mqtt2",
        "Dataset:mqtt2",
        f"Dataset:{OTHER}",
    ]
    # The long form stays long; the resource is a new generation, as an apply would make it.
    assert relations["team"]["spec"]["attributes"][1]["object"] == {
        "type": "Dataset",
        "name": "mqtt2",
    }
    assert relations["team"]["headers"]["generation"] == 2
    assert _objects(relations["mqtt-private"]) == ["Dataset:mqtt2"]
    flows = _get(capsys, ws, "flows")
    assert flows["hourly"]["spec"]["target"] == "Dataset:mqtt2"
    assert flows["everything"]["spec"]["target"] == "Dataset:%"

    async def trail() -> tuple[list[str], list[str], list[str]]:
        async with await open_node(ws) as node:
            team = [w.action for w in await writes_to(node.workspace, "Relations:team")]
            flow = [w.action for w in await writes_to(node.workspace, "Flow:everything")]
            dataset = [w.action for w in await writes_to(node.workspace, "mqtt2")]
            return team, flow, dataset

    assert asyncio.run(trail()) == (["apply", "apply"], ["apply"], ["rename"])


def test_delete_forgets_the_dataset_in_every_resource(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "rename", "--root", str(ws), MQTT, "mqtt2")
    assert code == 0, err
    code, _, err = run(capsys, "delete", "--root", str(ws), "-y", "mqtt2")
    assert code == 0, err

    relations = _get(capsys, ws, "relations")
    assert set(relations) == {"team"}  # mqtt-private named only the deleted dataset
    assert _objects(relations["team"]) == [f"Dataset:{OTHER}", f"Dataset:{OTHER}"]
    assert set(_get(capsys, ws, "flows")) == {"everything"}
    assert _access(capsys, ws, OTHER)["bob"][0] == "yes"

    # Someone creates a dataset under the old alias again: it inherits no role or attribute.
    for alias in (MQTT, "mqtt2"):
        code, _, err = run(
            capsys,
            "add",
            "--root",
            str(ws),
            "--name",
            alias,
            str(MANIFESTS / "root-mqtt-legacy.yaml"),
        )
        assert code == 0, err
        table = _access(capsys, ws, alias)
        assert table["(anonymous)"][0] == "yes" and "alice" not in table

    async def trail() -> list[str]:
        async with await open_node(ws) as node:
            return [w.action for w in await writes_to(node.workspace, "Relations:mqtt-private")]

    assert asyncio.run(trail()) == ["apply", "apply", "delete"]


def test_applying_the_old_file_again_is_refused_naming_it_and_the_alias(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "relations.yaml"
    code, _, err = run(capsys, "rename", "--root", str(ws), MQTT, "mqtt2")
    assert code == 0, err
    code, err = _apply(capsys, ws, manifest)
    assert code != 0
    assert (
        f"{manifest} document 0: Relations team names dataset {MQTT}, which was renamed to " in err
    )
    assert "mqtt2; name mqtt2 instead" in err and "nothing was applied" in err
    _private(_access(capsys, ws, "mqtt2"))  # nothing moved off the renamed dataset

    manifest.write_text(RELATIONS.replace(MQTT, "mqtt2"))
    code, err = _apply(capsys, ws, manifest)
    assert code == 0, err
    team = _get(capsys, ws, "relations")["team"]
    assert FOLLOWED not in team["status"]["conditions"]
    _private(_access(capsys, ws, "mqtt2"))

    code, _, err = run(capsys, "delete", "--root", str(ws), "-y", "mqtt2")
    assert code == 0, err
    code, err = _apply(capsys, ws, manifest)
    assert code != 0 and "Relations team names dataset mqtt2, which was deleted" in err
    # Once a dataset has the alias again, the file grants what it says to it.
    code, _, err = run(
        capsys,
        "add",
        "--root",
        str(ws),
        "--name",
        "mqtt2",
        str(MANIFESTS / "root-mqtt-legacy.yaml"),
    )
    assert code == 0, err
    code, err = _apply(capsys, ws, manifest)
    assert code == 0, err
    _private(_access(capsys, ws, "mqtt2"))


def test_a_rename_that_fails_midway_changes_nothing(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the alias changed in the catalog (here: writing a rewritten resource)
    rolls the whole rename back: the dataset never has its new alias without its restrictions."""

    async def broken(*args: object, **kwargs: object) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(ResourceTable, "rewrite", broken)

    async def rename() -> None:
        async with await open_node(ws) as node:
            with pytest.raises(StorageError, match="disk full"):
                await rename_dataset(node, MQTT, "mqtt2")

    asyncio.run(rename())
    monkeypatch.undo()
    code, out, _ = run(capsys, "list", "--root", str(ws), "--output", "json")
    aliases = {row["alias"]: row["id"] for row in json.loads(out)}
    assert MQTT in aliases and "mqtt2" not in aliases
    folder = ws / "datasets" / aliases[MQTT].removeprefix("did:odf:")
    assert (folder / "info" / "alias").read_text() == MQTT
    _private(_access(capsys, ws, MQTT))
    assert _objects(_get(capsys, ws, "relations")["mqtt-private"]) == [f"Dataset:{MQTT}"]


def test_a_delete_that_fails_on_the_resources_removes_nothing(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(ResourceTable, "rewrite", broken)
    code, _, err = run(capsys, "delete", "--root", str(ws), "-y", MQTT)
    assert code != 0 and "disk full" in err
    monkeypatch.undo()
    code, out, err = run(capsys, "log", "--root", str(ws), MQTT)
    assert code == 0 and "Seed" in out, err
    _private(_access(capsys, ws, MQTT))
    assert set(_get(capsys, ws, "relations")) == {"team", "mqtt-private"}
