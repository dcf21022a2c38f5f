"""The reference's ``datasets`` mutations, as the kamu web UI manages datasets: ``createEmpty``,
``createFromSnapshot`` and, under ``byId``, ``rename``, ``delete`` and ``setVisibility``. Each
translates its arguments into a call of :mod:`odfd.app.graphql_datasets` and the outcome into
the reference's result type and words; a refusal is a GraphQL error naming the dataset."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, TypeVar

from graphql import GraphQLError, GraphQLResolveInfo

from odfd.app import graphql_catalog as catalog
from odfd.app import graphql_datasets as manage
from odfd.server.graphql.identifiers import dataset_id
from protocol.model import DatasetKind
from storage.catalog import DatasetRecord

T = TypeVar("T")


def _refusals_as_errors(
    resolver: Callable[..., Awaitable[T]],
) -> Callable[..., Awaitable[T]]:
    @wraps(resolver)
    async def resolve(*args: Any, **kwargs: Any) -> T:
        try:
            return await resolver(*args, **kwargs)
        except manage.Refused as error:
            raise GraphQLError(str(error)) from None

    return resolve


@_refusals_as_errors
async def by_id(_source: Any, info: GraphQLResolveInfo, datasetId: str) -> DatasetRecord | None:
    ctx = info.context
    record = await catalog.record_of(ctx.node, dataset_id(datasetId))
    return manage.writable(ctx.caller, record)


@_refusals_as_errors
async def create_empty(
    _source: Any,
    info: GraphQLResolveInfo,
    datasetKind: str,
    datasetAlias: str,
    datasetVisibility: str,
) -> dict[str, Any]:
    info.context.caller.require_account()
    snapshot = manage.empty_snapshot(DatasetKind[datasetKind], datasetAlias)
    return await _create(info, snapshot, datasetVisibility)


@_refusals_as_errors
async def create_from_snapshot(
    _source: Any,
    info: GraphQLResolveInfo,
    snapshot: str,
    snapshotFormat: str,
    datasetVisibility: str,
) -> dict[str, Any]:
    assert snapshotFormat == "YAML", "the schema's only MetadataManifestFormat"
    info.context.caller.require_account()
    read = manage.read_snapshot(snapshot)
    if isinstance(read, manage.Malformed):
        return _failure("MetadataManifestMalformed", read.message)
    return await _create(info, read, datasetVisibility)


async def _create(info: GraphQLResolveInfo, snapshot: Any, visibility: str) -> dict[str, Any]:
    ctx = info.context
    outcome = await manage.create(ctx.node, ctx.caller, snapshot, public=visibility == "PUBLIC")
    if isinstance(outcome, manage.Created):
        return {
            "__typename": "CreateDatasetResultSuccess",
            "dataset": outcome.record,
            "isSuccess": True,
            "message": "Success",
        }
    if isinstance(outcome, manage.NameCollision):
        return {
            **_failure(
                "CreateDatasetResultNameCollision",
                f"Dataset with name '{outcome.name}' already exists",
            ),
            "accountName": outcome.account,
            "datasetName": outcome.name,
        }
    if isinstance(outcome, manage.MissingInputs):
        return {
            **_failure(
                "CreateDatasetResultMissingInputs",
                f"Dataset is referencing non-existing inputs: {', '.join(outcome.inputs)}",
            ),
            "missingInputs": outcome.inputs,
        }
    return _failure("CreateDatasetResultInvalidSnapshot", outcome.message)


def _failure(type_name: str, message: str) -> dict[str, Any]:
    return {"__typename": type_name, "isSuccess": False, "message": message}


@_refusals_as_errors
async def rename(source: DatasetRecord, info: GraphQLResolveInfo, newName: str) -> dict[str, Any]:
    ctx = info.context
    outcome = await manage.rename(ctx.node, ctx.caller, source, newName)
    if isinstance(outcome, manage.Renamed):
        return {
            "__typename": "RenameResultSuccess",
            "oldName": outcome.old_name,
            "newName": outcome.new_name,
            "message": "Success",
        }
    if isinstance(outcome, manage.RenameUnchanged):
        return {
            "__typename": "RenameResultNoChanges",
            "preservedName": outcome.name,
            "message": "No changes",
        }
    return {
        "__typename": "RenameResultNameCollision",
        "collidingAlias": outcome.alias,
        "message": f"Dataset '{outcome.alias}' already exists",
    }


@_refusals_as_errors
async def delete(source: DatasetRecord, info: GraphQLResolveInfo) -> dict[str, Any]:
    ctx = info.context
    outcome = await manage.delete(ctx.node, ctx.caller, source)
    if isinstance(outcome, manage.Deleted):
        return {
            "__typename": "DeleteResultSuccess",
            "deletedDataset": outcome.alias,
            "message": "Success",
        }
    return {
        "__typename": "DeleteResultDanglingReference",
        "notDeletedDataset": outcome.alias,
        "danglingChildRefs": outcome.readers,
        "message": f"Dataset '{outcome.alias}' has {outcome.count} dangling reference(s)",
    }


@_refusals_as_errors
async def set_visibility(
    source: DatasetRecord, info: GraphQLResolveInfo, visibility: dict[str, Any]
) -> dict[str, Any]:
    ctx = info.context
    public = visibility.get("public")
    await manage.set_visibility(
        ctx.node,
        ctx.caller,
        source,
        public=public is not None,
        anonymous=public is not None and bool(public["anonymousAvailable"]),
    )
    return {"__typename": "SetDatasetVisibilityResultSuccess", "message": "Success"}


def permissions(source: DatasetRecord, info: GraphQLResolveInfo) -> dict[str, Any]:
    """The reference's ``DatasetPermissions``; collaboration, environment variables, flows and
    webhooks are not served over GraphQL here, so nothing is offered for them."""
    allowed = manage.permissions(info.context.caller, source)
    nothing = {"canView": False, "canUpdate": False}
    return {
        "collaboration": nothing,
        "envVars": nothing,
        "webhooks": nothing,
        "flows": {"canView": False, "canRun": False},
        "general": {
            "canRename": allowed.rename,
            "canSetVisibility": allowed.set_visibility,
            "canDelete": allowed.delete,
        },
        "metadata": {"canCommit": allowed.commit},
    }


RESOLVERS: dict[str, Callable[..., Any]] = {
    "Dataset.permissions": permissions,
    "Dataset.role": lambda source, info: manage.role(info.context.caller, source),
    "DatasetsMut.byId": by_id,
    "DatasetsMut.createEmpty": create_empty,
    "DatasetsMut.createFromSnapshot": create_from_snapshot,
    "DatasetMut.dataset": lambda source, _info: source,
    "DatasetMut.rename": rename,
    "DatasetMut.delete": delete,
    "DatasetMut.setVisibility": set_visibility,
}
