"""S3 locations and settings, without any client (the CLI parses URLs and configuration before
it knows whether it will talk to a bucket; ``storage.s3_client`` holds the client).

URL forms (as kamu-cli parses them, path-style addressing for an explicit endpoint):
``s3://bucket/prefix`` (AWS, region from the settings, or the endpoint the AWS CLI's
conventions name: ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the profile's ``endpoint_url``),
``s3+http://host[:port]/bucket/prefix`` and ``s3+https://host[:port]/bucket/prefix`` (any
S3-compatible server).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import ParseError
from protocol.frozen import frozen_dataclass
from storage.errors import StorageError

DEFAULT_REGION = "us-east-1"
_SCHEMES = ("s3", "s3+http", "s3+https")


class S3ProfileError(StorageError):
    """An AWS profile file cannot be read."""


class S3EndpointError(StorageError):
    """An S3 endpoint named by the environment or an AWS profile is not an http(s) URL."""


# --- URLs ------------------------------------------------------------------------------------------


@frozen_dataclass
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


@frozen_dataclass
class S3Credentials:
    """Per-remote settings from ``config.toml``; empty fields fall back to the environment."""

    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    region: str = ""
    profile: str = ""


@frozen_dataclass
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
        profile = _profile(own.profile or self.profile or env.get("AWS_PROFILE") or "default", env)
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
        elif profile.values.get("aws_access_key_id"):
            config["access_key_id"] = profile.values["aws_access_key_id"]
            config["secret_access_key"] = profile.values.get("aws_secret_access_key", "")
            if profile.values.get("aws_session_token"):
                config["session_token"] = profile.values["aws_session_token"]
        else:
            config["skip_signature"] = True
        region = (
            own.region
            or env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or profile.values.get("region")
            or self.region
            or DEFAULT_REGION
        )
        config["region"] = region
        # obstore would otherwise pick an endpoint from the environment on its own (and put
        # AWS_ENDPOINT_URL_S3 before the URL's): the one decided here is the one used.
        endpoint = _endpoint(location, profile, env) or f"https://s3.{region}.amazonaws.com"
        config["endpoint"] = config["aws_endpoint_url_s3"] = endpoint
        config["virtual_hosted_style_request"] = False
        # If-None-Match / If-Match on PUT: how refs/head moves by compare-and-swap.
        config["conditional_put"] = "etag"
        return config

    def endpoint_for(
        self, location: S3Location, env: Mapping[str, str] | None = None
    ) -> str | None:
        """The server requests for ``location`` go to (``None``: AWS): the URL's own
        (``s3+http(s)://``), else the first of ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``,
        ``AWS_ENDPOINT`` (``object_store``'s name), the ``s3`` entry of the profile's
        ``services`` section and the profile's ``endpoint_url``, as the AWS CLI decides; none of
        the configured ones when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` (or the profile's
        ``ignore_configured_endpoint_urls``) is true. Requests to an endpoint are path-style."""
        env = os.environ if env is None else env
        own = self.credentials_for(location.url)
        name = own.profile or self.profile or env.get("AWS_PROFILE") or "default"
        return _endpoint(location, _profile(name, env), env)


def _endpoint(location: S3Location, profile: _Profile, env: Mapping[str, str]) -> str | None:
    if location.endpoint is not None:
        return location.endpoint
    ignore = env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") or profile.settings.get(
        "ignore_configured_endpoint_urls", ""
    )
    if ignore.strip().lower() == "true":
        return None
    candidates = (
        *((f"${name}", env.get(name)) for name in _ENDPOINT_VARIABLES),
        (f"{profile.where} services s3 endpoint_url", profile.s3_service.get("endpoint_url")),
        (f"{profile.where} endpoint_url", profile.settings.get("endpoint_url")),
    )
    for where, value in candidates:
        if value and value.strip():
            return _check_endpoint(value.strip(), where)
    return None


_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")


def _check_endpoint(value: str, where: str) -> str:
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise S3EndpointError(
            f"{where} = {value!r}: an S3 endpoint is an http:// or https:// URL "
            "(e.g. http://127.0.0.1:9000)"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise S3EndpointError(f"{where} = {value!r}: an S3 endpoint takes no query or credentials")
    return value.rstrip("/")


@frozen_dataclass
class _Profile:
    """One AWS profile: its keys (the credentials file's winning) and its ``services`` entry
    for S3 (``s3 =`` followed by indented ``key = value`` lines)."""

    where: str
    values: dict[str, str]
    settings: dict[str, str]
    """The keys of the config file alone (where the AWS CLI reads endpoints from)."""
    s3_service: dict[str, str]


def _profile(name: str, env: Mapping[str, str]) -> _Profile:
    """``name``'s keys from the shared config and credentials files."""
    import configparser  # here: only an S3 profile needs it, every command reads the settings

    home = Path(env.get("HOME", "~")).expanduser()
    config_file = Path(env.get("AWS_CONFIG_FILE", home / ".aws" / "config"))
    files = (
        (config_file, f"profile {name}"),
        (Path(env.get("AWS_SHARED_CREDENTIALS_FILE", home / ".aws" / "credentials")), name),
    )
    found: dict[str, str] = {}
    settings: dict[str, str] = {}
    services: dict[str, str] = {}
    for path, section in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error as err:
            raise S3ProfileError(f"{path}: not a valid AWS profile file: {err}") from None
        for candidate in (section, name):
            if parser.has_section(candidate):
                found.update(parser[candidate])
                if path == config_file:
                    settings = dict(parser[candidate])
                    services = _s3_service(parser, settings.get("services"))
                break
    return _Profile(f"{config_file}: profile {name}", found, settings, services)


def _s3_service(parser: Any, services: str | None) -> dict[str, str]:
    """The ``s3`` keys of the config file's ``[services NAME]`` section."""
    section = f"services {services.strip()}" if services else None
    if section is None or not parser.has_section(section):
        return {}
    entry = parser.get(section, "s3", fallback="")
    keys: dict[str, str] = {}
    for line in entry.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            keys[key.strip().lower()] = value.strip()
    return keys
