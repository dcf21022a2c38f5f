"""A ``PersistentVolume``'s spec read into the storage it names.

Only ``kind: S3`` is a volume this node keeps datasets on: a prefix of a bucket at ``endpoint``
(AWS when it names ``amazonaws.com``; any S3-compatible server otherwise), signed with the
``accessKey`` / ``secretKey`` its ``credentials`` take from a SecretSet, decrypted only when the
storage is made. Errors name the field and never a secret value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from odfd.app.node_secrets import NodeSecrets
from odfd.app.value_refs import resolve_values
from odfd.volumes.errors import VolumeError
from protocol.errors import OdfError
from storage.catalog.resources import ResourceRecord
from storage.dataset_storage import DatasetStorage
from storage.object_cache import ObjectCache
from storage.s3_client import S3Bucket
from storage.s3_settings import S3Credentials, S3Location, S3Settings, parse_s3_url
from storage.s3_storage import S3DatasetStorage
from storage.workspace import Workspace

CREDENTIALS = "spec.credentials."
CACHE_MB = 1024
"""The read-through cache of one volume's objects (as ``[storage] cache_mb`` for the node's)."""


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    location: S3Location
    region: str

    @classmethod
    def from_record(cls, record: ResourceRecord) -> VolumeSpec:
        spec: dict[str, Any] = record.spec
        where = f"PersistentVolume {record.name}"
        kind = spec.get("kind")
        if kind != "S3":
            raise VolumeError(
                "unsupported-kind",
                f"{where}: spec.kind: {kind!r} is not a volume odfd keeps datasets on (S3)",
            )
        bucket = spec.get("bucket")
        if not isinstance(bucket, str) or not bucket:
            raise VolumeError("invalid-spec", f"{where}: spec.bucket: name the bucket")
        prefix = str(spec.get("prefix") or "").strip("/")
        endpoint = spec.get("endpoint")
        if endpoint:
            parts = urlsplit(str(endpoint))
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise VolumeError(
                    "invalid-spec", f"{where}: spec.endpoint: {endpoint!r} is not an http(s) URL"
                )
            text = f"s3+{parts.scheme}://{parts.netloc}/{bucket}/{prefix}"
        else:
            text = f"s3://{bucket}/{prefix}"
        try:
            location = parse_s3_url(text.rstrip("/"))
        except OdfError as err:
            raise VolumeError("invalid-spec", f"{where}: {err}") from None
        return cls(location, str(spec.get("region") or ""))


async def volume_storage(
    workspace: Workspace, record: ResourceRecord, secrets: NodeSecrets
) -> DatasetStorage:
    """The storage of the volume, its credentials resolved (``VolumeError`` otherwise)."""
    spec = VolumeSpec.from_record(record)
    where = f"PersistentVolume {record.name}"
    values = await resolve_values(workspace, record.id, where, CREDENTIALS, secrets)
    access, secret = values.values.get("accessKey"), values.values.get("secretKey")
    if (access is None) != (secret is None):
        raise VolumeError(
            "invalid-spec", f"{where}: spec.credentials: give both accessKey and secretKey"
        )
    credentials = S3Credentials(
        access_key_id=access or "", secret_access_key=secret or "", region=spec.region
    )
    settings = S3Settings(region=spec.region, remotes={spec.location.url: credentials})
    cache = ObjectCache(workspace.root / "cache" / "volumes" / record.id, max_bytes=CACHE_MB << 20)
    return S3DatasetStorage(S3Bucket(spec.location, settings), spec.location, cache)
