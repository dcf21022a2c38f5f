"""S3 locations and settings, without any client (the CLI parses URLs and configuration before
it knows whether it will talk to a bucket; ``storage.s3_client`` holds the client).

URL forms (as kamu-cli parses them, path-style addressing for an explicit endpoint):
``s3://bucket/prefix`` (AWS, region from the settings), ``s3+http://host[:port]/bucket/prefix``
and ``s3+https://host[:port]/bucket/prefix`` (any S3-compatible server).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import ParseError
from storage.errors import StorageError

DEFAULT_REGION = "us-east-1"
_SCHEMES = ("s3", "s3+http", "s3+https")


class S3ProfileError(StorageError):
    """An AWS profile file cannot be read."""


# --- URLs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class S3Location:
    """A bucket and a key prefix (``""`` or ending in ``/``) on an endpoint (``None``: AWS)."""

    bucket: str
    prefix: str
    endpoint: str | None = None

    @property
    def url(self) -> str:
        """The canonical URL, with a trailing slash (as the reference prints it)."""
        base = f"s3+{self.endpoint}/{self.bucket}" if self.endpoint else f"s3://{self.bucket}"
        return f"{base}/{self.prefix}"

    def child(self, name: str) -> S3Location:
        """The location of folder ``name`` below this one."""
        return replace(self, prefix=f"{self.prefix}{name.strip('/')}/")

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def __str__(self) -> str:
        return self.url


def is_s3_url(text: str) -> bool:
    return urlsplit(text).scheme.lower() in _SCHEMES


def parse_s3_url(text: str) -> S3Location:
    """``s3://bucket/prefix``, ``s3+http(s)://host[:port]/bucket/prefix``; ``ParseError`` else."""
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ParseError(f"{text}: not an S3 URL (s3://, s3+http://, s3+https://)")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ParseError(
            f"{text}: S3 URLs take no query, fragment or credentials (configure them instead)"
        )
    if not parts.netloc:
        raise ParseError(f"{text}: an S3 URL needs a {'bucket' if scheme == 's3' else 'host'}")
    if scheme == "s3":
        bucket, path, endpoint = parts.netloc, parts.path, None
    else:
        bucket, _, path = parts.path.lstrip("/").partition("/")
        endpoint = f"{scheme.removeprefix('s3+')}://{parts.netloc}"
        if not bucket:
            raise ParseError(f"{text}: no bucket after the host (s3+http://host:port/bucket/...)")
    _check_bucket(bucket, text)
    segments = [s for s in path.split("/") if s]
    if any(s in (".", "..") for s in segments):
        raise ParseError(f"{text}: '.' and '..' are not allowed in an S3 prefix")
    prefix = "".join(f"{s}/" for s in segments)
    return S3Location(bucket, prefix, endpoint)


def _check_bucket(bucket: str, text: str) -> None:
    ok = 3 <= len(bucket) <= 63 and all(c.islower() or c.isdigit() or c in ".-" for c in bucket)
    if not ok or not bucket[0].isalnum() or not bucket[-1].isalnum():
        raise ParseError(
            f"{text}: {bucket!r} is not a bucket name (3-63 lower-case letters, digits, '.', '-')"
        )


# --- credentials -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class S3Credentials:
    """Per-remote settings from ``config.toml``; empty fields fall back to the environment."""

    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    region: str = ""
    profile: str = ""


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How odfd reaches S3: ``[s3]`` defaults and per-remote credentials (``remotes``, keyed by
    URL prefix, longest match wins), then ``AWS_*`` variables, then the shared credentials
    file's profile; without any, requests go unsigned (public buckets)."""

    region: str = ""
    profile: str = ""
    remotes: Mapping[str, S3Credentials] = field(default_factory=dict)
    retries: int = 3
    """Attempts per request after the first (connection failures and 5xx answers)."""
    retry_timeout: float = 20.0
    connect_timeout: float = 10.0

    def credentials_for(self, url: str) -> S3Credentials:
        best = max((p for p in self.remotes if url.startswith(p)), key=len, default=None)
        return self.remotes[best] if best is not None else S3Credentials()

    def resolve(self, location: S3Location, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The ``obstore`` configuration for ``location`` (secrets included: never print it)."""
        env = os.environ if env is None else env
        own = self.credentials_for(location.url)
        profile_name = own.profile or self.profile or env.get("AWS_PROFILE") or "default"
        profile = _profile(profile_name, env)
        config: dict[str, Any] = {}
        if own.access_key_id:
            config["access_key_id"] = own.access_key_id
            config["secret_access_key"] = own.secret_access_key
            if own.session_token:
                config["session_token"] = own.session_token
        elif env.get("AWS_ACCESS_KEY_ID") and not own.profile:
            config["access_key_id"] = env["AWS_ACCESS_KEY_ID"]
            config["secret_access_key"] = env.get("AWS_SECRET_ACCESS_KEY", "")
            if env.get("AWS_SESSION_TOKEN"):
                config["session_token"] = env["AWS_SESSION_TOKEN"]
        elif profile.get("aws_access_key_id"):
            config["access_key_id"] = profile["aws_access_key_id"]
            config["secret_access_key"] = profile.get("aws_secret_access_key", "")
            if profile.get("aws_session_token"):
                config["session_token"] = profile["aws_session_token"]
        else:
            config["skip_signature"] = True
        config["region"] = (
            own.region
            or env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or profile.get("region")
            or self.region
            or DEFAULT_REGION
        )
        if location.endpoint is not None:
            config["endpoint"] = location.endpoint
            config["virtual_hosted_style_request"] = False
        # If-None-Match / If-Match on PUT: how refs/head moves by compare-and-swap.
        config["conditional_put"] = "etag"
        return config


def _profile(name: str, env: Mapping[str, str]) -> dict[str, str]:
    """``name``'s keys from the shared credentials and config files (credentials win)."""
    import configparser  # here: only an S3 profile needs it, every command reads the settings

    home = Path(env.get("HOME", "~")).expanduser()
    found: dict[str, str] = {}
    files = (
        (Path(env.get("AWS_CONFIG_FILE", home / ".aws" / "config")), f"profile {name}"),
        (Path(env.get("AWS_SHARED_CREDENTIALS_FILE", home / ".aws" / "credentials")), name),
    )
    for path, section in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error as err:
            raise S3ProfileError(f"{path}: not a valid AWS profile file: {err}") from None
        for candidate in (section, name):
            if parser.has_section(candidate):
                found.update(parser[candidate])
                break
    return found
