"""The committed generated modules are exactly what scripts/gen_model.py produces from protocol/spec/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_generated_files_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_model.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_model_covers_every_metadata_event_of_the_spec() -> None:
    from protocol.model import METADATA_EVENT_TYPES, DisablePollingSource, kind_name

    assert kind_name(DisablePollingSource()) == "DisablePollingSource"

    assert [t.__name__ for t in METADATA_EVENT_TYPES] == [
        "AddData", "ExecuteTransform", "Seed", "SetPollingSource", "SetTransform", "SetVocab", "SetAttachments",
        "SetInfo", "SetLicense", "SetDataSchema", "AddPushSource", "DisablePushSource", "DisablePollingSource",
    ]
