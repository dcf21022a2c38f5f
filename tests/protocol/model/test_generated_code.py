"""The committed generated modules are exactly what scripts/gen_model.py produces from protocol/spec/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_generated_files_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_model.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_model_covers_every_metadata_event_of_the_spec() -> None:
    from protocol.model import METADATA_EVENT_TYPES, DisablePollingSource, kind_name

    assert kind_name(DisablePollingSource()) == "DisablePollingSource"

    assert [t.__name__ for t in METADATA_EVENT_TYPES] == [
        "AddData",
        "ExecuteTransform",
        "Seed",
        "SetPollingSource",
        "SetTransform",
        "SetVocab",
        "SetAttachments",
        "SetInfo",
        "SetLicense",
        "SetDataSchema",
        "AddPushSource",
        "DisablePushSource",
        "DisablePollingSource",
    ]


def test_hand_written_resource_classes_must_match_their_schemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generator takes the RFC-018 envelope from protocol/model/resource.py instead of generating
    it; a schema change that the hand-written class does not follow stops generation."""
    spec = importlib.util.spec_from_file_location("gen_model", ROOT / "scripts" / "gen_model.py")
    assert spec is not None
    gen_model = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gen_model", gen_model)  # its dataclasses look their module up
    spec.loader.exec_module(gen_model)
    schemas = gen_model.SchemaSet()
    schemas.load_all()
    gen_model.check_hand_written(schemas)

    status = schemas.types["ResourceStatus"]
    status.fields = [f for f in status.fields if f.py_name != "reconciled_at"]
    with pytest.raises(
        SystemExit, match=r"resource.py ResourceStatus has fields .*'reconciled_at': False"
    ):
        gen_model.check_hand_written(schemas)
