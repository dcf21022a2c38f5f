"""``odfd apply`` warns of a credential a ``Dataset`` resource's fetch step holds in the clear,
as ``odfd add`` does for a snapshot: the same fields, the same words, never the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run

ADVICE = (
    " is a literal secret: it would be in the dataset's metadata, which every copy of the "
    "dataset keeps for good; write it as a ${{ env.NAME }} template, set when pulling"
)


def dataset_manifest(authorization: str, url: str) -> str:
    return f"""\
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
headers:
  name: feed.cases
spec:
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: {url}
        headers:
          - name: Authorization
            value: {authorization}
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: id
              type: int64
      merge:
        kind: Append
"""


@pytest.fixture
def root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, _, err = run(capsys, "init", "--root", str(tmp_path / "ws"))
    assert code == 0, err
    return tmp_path / "ws"


def test_apply_warns_of_each_literal_secret_of_a_dataset(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "leaky.yaml"
    manifest.write_text(
        dataset_manifest("Bearer abc123", "https://example.org/c.csv?api_key=xyz&page=2")
    )
    code, _, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(manifest))
    assert code == 0, err
    warnings = sorted(line for line in err.splitlines() if line.startswith("warning: "))
    assert warnings == [
        "warning: feed.cases: SetPollingSource.fetch.headers[Authorization]" + ADVICE,
        "warning: feed.cases: SetPollingSource.fetch.url (query parameter api_key)" + ADVICE,
    ]
    assert "abc123" not in err and "xyz" not in err
    assert "Dataset/feed.cases created" in err


def test_apply_of_templated_secrets_warns_of_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "templated.yaml"
    manifest.write_text(
        dataset_manifest("Bearer ${{ env.TOKEN }}", "https://example.org/c.csv?page=2")
    )
    code, _, err = run(capsys, "apply", "--no-daemon", "--root", str(root), "-f", str(manifest))
    assert code == 0, err
    assert "warning: " not in err
