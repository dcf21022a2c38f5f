"""``PersistentVolume`` resources and a ``Dataset`` with ``volume:``: the spec's
``storage-volume`` example on a real S3 server (SeaweedFS), its credentials from a SecretSet —
the dataset's blocks and data land in the volume's bucket prefix, not in the workspace, and the
node finds them again when it opens anew; a volume it cannot use fails precisely."""

from __future__ import annotations

from pathlib import Path

from odfd.app.controllers import Reconciler
from odfd.app.node import open_node
from odfd.app.resource_types import DATASET, PERSISTENT_VOLUME
from odfd.app.resources import RECONCILE_ERROR, apply_manifests, load_manifests
from odfd.config import SyncConfig
from storage.catalog.resources import ResourceTable
from storage.placed_storage import PLACEMENTS_FILE
from storage.s3_client import S3Bucket
from storage.s3_settings import parse_s3_url
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedServer

EXAMPLES = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "storage-volume"


def _manifests(folder: Path, s3: SeaweedServer, bucket: str, secret: str = SECRET_KEY) -> None:
    """The example, adapted: the endpoint on loopback, the bucket made for the test, and the
    SecretSet's values given plainly (the example's are `<jwe>` placeholders)."""
    volume = (EXAMPLES / "volume.yaml").read_text()
    volume = volume.replace("https://s3.amazonaws.com", s3.endpoint).replace("my-bucket", bucket)
    (folder / "volume.yaml").write_text(volume)
    (folder / "dataset.yaml").write_text((EXAMPLES / "dataset.yaml").read_text())
    (folder / "secrets.yaml").write_text(
        "$schema: SecretSet\nheaders: {name: my-aws-secrets}\n"
        f"spec:\n  secrets:\n    accessKey: {ACCESS_KEY}\n    secretKey: {secret}\n"
    )


async def test_dataset_on_an_s3_volume(
    tmp_path: Path, s3_server: SeaweedServer, s3_bucket: str
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    _manifests(folder, s3_server, s3_bucket)
    root = tmp_path / "ws"
    async with await Workspace.init(root) as workspace:
        await apply_manifests(workspace, load_manifests([folder]))
        results = await Reconciler(workspace, SyncConfig()).reconcile_all()
        phases = {r.resource.name: (r.phase, r.message) for r in results}
        assert phases["my-s3-bucket"][0] == "Ready", phases
        assert phases["my-dataset"] == ("Ready", "dataset created"), phases
        found = await workspace.catalog.find_by_alias("my-dataset")
        assert found is not None
        dataset_id = found.id
    assert not any((root / "datasets").glob("*")), "nothing of it in the workspace's folder"
    assert str(dataset_id) in (root / PLACEMENTS_FILE).read_text()

    location = parse_s3_url(s3_server.url(s3_bucket, "some-prefix"))
    bucket = S3Bucket(location, s3_server.settings())
    keys = [key async for key in bucket.list_keys("some-prefix/")]
    assert any(key.endswith("refs/head") for key in keys), keys
    assert any("/blocks/" in key for key in keys), keys

    async with await open_node(root) as node:  # a new process finds it on the volume
        dataset = node.workspace.open_dataset(dataset_id)
        blocks = [b async for _, b in dataset.chain.iter_blocks()]
        assert [type(b.event).__name__ for b in blocks] == ["Seed"]
        assert node.workspace.storage.where(dataset_id).startswith(location.url)


async def test_a_volume_it_cannot_use_fails_precisely(
    tmp_path: Path, s3_server: SeaweedServer, s3_bucket: str
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    _manifests(folder, s3_server, s3_bucket, secret="wrong-secret")
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await apply_manifests(workspace, load_manifests([folder]))
        await Reconciler(workspace, SyncConfig()).reconcile_all()
        resources = ResourceTable(workspace.catalog)
        volume = await resources.find(PERSISTENT_VOLUME.schema, "my-s3-bucket")
        dataset = await resources.find(DATASET.schema, "my-dataset")
        assert volume is not None and dataset is not None
        assert volume.status["phase"] == "Failed"
        condition = volume.status["conditions"][RECONCILE_ERROR]
        assert condition["code"] == "unreachable", condition
        assert condition["message"].startswith("PersistentVolume my-s3-bucket: "), condition
        assert "wrong-secret" not in condition["message"]
        assert dataset.status["phase"] == "Failed"
        assert await workspace.catalog.find_by_alias("my-dataset") is None
