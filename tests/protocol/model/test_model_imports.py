"""The model's modules import without a circle, so their annotations resolve at run time."""

from __future__ import annotations

import typing

from protocol.model import Resource, ResourcePhase, ResourceStatus, _enums_generated, _generated


def test_resource_status_annotations_resolve() -> None:
    hints = typing.get_type_hints(ResourceStatus)
    assert hints["phase"] is ResourcePhase
    assert typing.get_type_hints(Resource)["status"] is ResourceStatus


def test_generated_model_re_exports_the_leaf_enums() -> None:
    assert _generated.ResourcePhase is _enums_generated.ResourcePhase
