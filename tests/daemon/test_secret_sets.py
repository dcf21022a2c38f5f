"""SecretSet and VariableSet: plain secrets encrypted on apply with the node's key and never shown
(get, errors, logs, the catalog file), pre-encrypted values accepted, and references to a key
that does not exist named in the referrer's condition."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from joserfc import jwe
from joserfc.jwk import OKPKey

from odfd.app.node_secrets import NodeSecrets, SecretError
from odfd.app.resource_types import SECRET_SET, SOURCE
from odfd.app.resources import RECONCILE_ERROR, REFERENCES
from storage.catalog.resources import ResourceTable
from storage.keys import KeyStore
from storage.workspace import Workspace
from tests.cli.helpers import run

PLAIN = "hunter2-very-secret"
SECRETS = """\
$schema: SecretSet
headers: {{name: feed}}
spec:
  secrets:
    apiKey: {api_key}
    token: {{value: second-plain-value}}
{extra}"""
SOURCE_USING = """\
$schema: Source
headers: {name: feed}
spec:
  config:
    apiKey: SecretSet:feed#apiKey
    missing: {type: SecretSet, name: feed, path: nosuchkey}
  ingress:
    kind: Url
    url: http://127.0.0.1:9/x
    headers: [{name: Authorization, value: "Bearer ${{ config.apiKey }}"}]
  read: {kind: Csv}
"""


def _write(folder: Path, api_key: str = PLAIN, extra: str = "") -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "secrets.yaml").write_text(SECRETS.format(api_key=api_key, extra=extra))
    (folder / "source.yaml").write_text(SOURCE_USING)
    return folder


def test_plain_secrets_are_encrypted_and_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    root = tmp_path / "ws"
    assert run(capsys, "init", "--root", str(root))[0] == 0
    folder = _write(tmp_path / "m")
    code, out, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(folder))
    shown = out + err
    assert "SecretSet/feed created" in err
    code, out, _ = run(capsys, "get", "secretset", "feed", "-o", "json", "--root", str(root))
    document = json.loads(out)
    shown += out
    assert document["status"]["phase"] == "Ready"
    secrets = document["spec"]["secrets"]
    assert secrets["apiKey"]["contentEncoding"] == "jwe"
    code, out, _ = run(capsys, "get", "all", "--root", str(root))
    shown += out
    code, out, _ = run(capsys, "get", "source", "feed", "-o", "yaml", "--root", str(root))
    shown += out
    assert "SecretSet:feed has no key nosuchkey" in out
    for text in (shown, caplog.text):
        assert PLAIN not in text and "second-plain-value" not in text
    # Not in the catalog file (nor its write-ahead log) either.
    for path in root.rglob("*"):
        if path.is_file():
            assert PLAIN.encode() not in path.read_bytes(), path

    # Only this node reads them, with its own key.
    keys = next(p for p in root.rglob("node.key")).parent
    node = NodeSecrets(KeyStore(keys))
    assert node.decrypt(secrets["apiKey"]["value"]) == PLAIN
    assert node.decrypt(secrets["token"]["value"]) == "second-plain-value"
    other = NodeSecrets(KeyStore(tmp_path / "other-keys"))
    with pytest.raises(SecretError, match="not a JWE this node can decrypt") as caught:
        other.decrypt(secrets["apiKey"]["value"])
    assert PLAIN not in str(caught.value)

    # Re-applying the same plain values changes nothing (the ciphertext is kept).
    code, _, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(folder))
    assert "SecretSet/feed unchanged (generation 1)" in err
    # A new value is a new generation.
    _write(folder, api_key="rotated-value")
    code, _, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(folder))
    assert "SecretSet/feed configured (generation 2)" in err
    assert "rotated-value" not in err


async def test_pre_encrypted_values(tmp_path: Path) -> None:
    from odfd.app.controllers import Reconciler
    from odfd.app.resources import apply_manifests, load_manifests
    from odfd.config import SyncConfig

    async with await Workspace.init(tmp_path / "ws") as workspace:
        # Encrypted elsewhere, with only the node's public key.
        public = OKPKey.import_key(NodeSecrets(workspace.keys).public_jwk())
        assert "d" not in public.as_dict()
        token = jwe.encrypt_compact(
            {"alg": "ECDH-ES+A256KW", "enc": "A256GCM"}, b"from-outside", public
        )
        stranger = NodeSecrets(KeyStore(tmp_path / "stranger"))
        foreign = stranger.encrypt("for another node")
        extra = (
            f"    fromOutside: {{value: '{token}', contentEncoding: jwe}}\n"
            f"    foreign: {{value: '{foreign}', contentEncoding: jwe}}\n"
        )
        folder = _write(tmp_path / "m", extra=extra)
        await apply_manifests(workspace, load_manifests([folder]))
        await Reconciler(workspace, SyncConfig()).reconcile_all()
        table = ResourceTable(workspace.catalog)
        record = await table.find(SECRET_SET.schema, "feed")
        assert record is not None
        assert record.spec["secrets"]["fromOutside"]["value"] == token  # stored as given
        assert NodeSecrets(workspace.keys).decrypt(token) == "from-outside"
        assert record.status["phase"] == "Failed"
        message = record.status["conditions"][RECONCILE_ERROR]["message"]
        assert message.startswith("spec.secrets.foreign: not a JWE this node can decrypt")
        assert "fromOutside" not in message and "apiKey" not in message
        source = await table.find(SOURCE.schema, "feed")
        assert source is not None
        assert source.status["conditions"][REFERENCES]["message"] == (
            "spec.config.missing: SecretSet:feed has no key nosuchkey"
        )


def test_unknown_content_encoding_is_refused(tmp_path: Path) -> None:
    from odfd.app.resources import load_manifests
    from odfd.errors import ManifestError

    folder = _write(tmp_path / "m", api_key="{value: abc, contentEncoding: base64}")
    with pytest.raises(ManifestError, match=r"spec\.secrets\.apiKey\.contentEncoding: 'base64'"):
        load_manifests([folder])
