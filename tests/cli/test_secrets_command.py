"""``odfd secrets key|encrypt``: a publisher encrypts a secret to a node's public key elsewhere,
and the manifest holding only the JWE applies on that node (and on no other)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from odfd.app.node_secrets import NodeSecrets
from odfd.cli.main import main
from storage.keys import KeyStore
from tests.cli.helpers import run

PLAIN = "publisher-only-value"


def _encrypt(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str, *argv: str
) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = run(capsys, "secrets", "encrypt", *argv)
    assert code == 0
    return out.strip()


def _apply(
    capsys: pytest.CaptureFixture[str], root: Path, folder: Path, token: str
) -> tuple[int, str, dict]:
    """Exit code and messages of ``odfd apply`` of a SecretSet holding ``token``, and the set."""
    folder.mkdir(exist_ok=True)
    (folder / "secrets.yaml").write_text(
        "$schema: SecretSet\nheaders: {name: feed}\nspec:\n  secrets:\n"
        f"    apiKey: {{value: '{token}', contentEncoding: jwe}}\n"
    )
    applied, _, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(folder))
    code, out, _ = run(capsys, "get", "secretset", "feed", "-o", "json", "--root", str(root))
    assert code == 0
    document: dict = json.loads(out)
    return applied, err, document


def test_a_secret_encrypted_elsewhere_applies_on_its_node_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    node, other = tmp_path / "node", tmp_path / "other"
    for root in (node, other):
        assert run(capsys, "init", "--root", str(root))[0] == 0
    code, out, _ = run(capsys, "secrets", "key", "--root", str(node))
    assert code == 0
    key = json.loads(out)
    assert key["kty"] == "OKP" and key["crv"] == "X25519" and "d" not in key
    key_file = tmp_path / "node.jwk"
    key_file.write_text(out)

    # The publisher's machine has no workspace: only the key file.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ODFD_HOME", raising=False)
    token = _encrypt(capsys, monkeypatch, PLAIN + "\n", "--key", str(key_file))
    assert PLAIN not in token and token.count(".") == 4
    assert NodeSecrets(KeyStore(node / "keys")).decrypt(token) == PLAIN

    code, _, document = _apply(capsys, node, tmp_path / "m", token)
    assert code == 0
    assert document["status"]["phase"] == "Ready"
    assert document["spec"]["secrets"]["apiKey"]["value"] == token
    assert PLAIN not in json.dumps(document)

    # Encrypted to this workspace's own node when no key is given; no other node can read it.
    own = _encrypt(capsys, monkeypatch, "second", "--root", str(other))
    code, err, document = _apply(capsys, node, tmp_path / "m", own)
    assert code == 1 and "spec.secrets.apiKey: not a JWE this node can decrypt" in err
    assert document["status"]["phase"] == "Failed"


def test_bad_keys_and_empty_secrets_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    assert run(capsys, "init", "--root", str(root))[0] == 0
    private = NodeSecrets(KeyStore(tmp_path / "k"))._private.as_dict(private=True)
    cases = {
        "private.jwk": (json.dumps(private), "holds a private key"),
        "signing.jwk": ('{"kty": "OKP", "crv": "Ed25519", "x": "AA"}', 'expected "X25519"'),
        "rsa.jwk": ('{"kty": "RSA", "n": "AA", "e": "AQAB"}', "expected a JWK object"),
        "text.jwk": ("not json", "is not JSON"),
    }
    for name, (content, reason) in cases.items():
        (tmp_path / name).write_text(content)
        monkeypatch.setattr("sys.stdin", io.StringIO(PLAIN))
        with pytest.raises(SystemExit) as refused:
            main(["secrets", "encrypt", "--key", str(tmp_path / name)])
        message = str(refused.value.code)
        assert name in message and reason in message, message
        assert PLAIN not in message
    with pytest.raises(SystemExit) as refused:
        main(["secrets", "encrypt", "--key", str(tmp_path / "missing.jwk")])
    assert "cannot read" in str(refused.value.code)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    with pytest.raises(SystemExit) as refused:
        main(["secrets", "encrypt", "--root", str(root)])
    assert "the secret is empty" in str(refused.value.code)
