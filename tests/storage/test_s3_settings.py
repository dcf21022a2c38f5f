"""Which S3 server a bucket URL reaches, decided as the AWS CLI decides it: the URL's own endpoint
(``s3+http(s)://``), else ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the profile's
``services`` entry for S3 and its ``endpoint_url`` (``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``
turns those off); and the configuration handed to obstore names that endpoint, so obstore never
picks another from the environment on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.s3_settings import S3EndpointError, S3Settings, parse_s3_url

AWS = parse_s3_url("s3://bucket/prefix")
EXPLICIT = parse_s3_url("s3+http://10.0.0.1:9000/bucket/prefix")


def profile_files(tmp_path: Path, config: str, credentials: str = "") -> dict[str, str]:
    (tmp_path / "config").write_text(config)
    (tmp_path / "credentials").write_text(credentials)
    return {
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }


@pytest.fixture
def no_profile(tmp_path: Path) -> dict[str, str]:
    return profile_files(tmp_path, "")


def test_without_any_endpoint_s3_urls_reach_aws(no_profile: dict[str, str]) -> None:
    settings = S3Settings(region="eu-west-1")
    assert settings.endpoint_for(AWS, no_profile) is None
    config = settings.resolve(AWS, no_profile)
    assert (
        config["endpoint"] == config["aws_endpoint_url_s3"] == "https://s3.eu-west-1.amazonaws.com"
    )


def test_the_variables_in_the_aws_clis_order(no_profile: dict[str, str]) -> None:
    settings = S3Settings()
    env = {**no_profile, "AWS_ENDPOINT": "http://c:3", "AWS_ENDPOINT_URL": "http://b:2/"}
    assert settings.endpoint_for(AWS, env) == "http://b:2"
    env["AWS_ENDPOINT_URL_S3"] = "https://a:1"
    assert settings.endpoint_for(AWS, env) == "https://a:1"
    config = settings.resolve(AWS, env)
    assert (config["endpoint"], config["aws_endpoint_url_s3"]) == ("https://a:1", "https://a:1")
    assert config["virtual_hosted_style_request"] is False
    del env["AWS_ENDPOINT_URL_S3"], env["AWS_ENDPOINT_URL"]
    assert settings.endpoint_for(AWS, env) == "http://c:3"


def test_a_urls_own_endpoint_beats_the_environment(no_profile: dict[str, str]) -> None:
    env = {**no_profile, "AWS_ENDPOINT_URL_S3": "http://elsewhere:1"}
    assert S3Settings().endpoint_for(EXPLICIT, env) == "http://10.0.0.1:9000"
    assert S3Settings().resolve(EXPLICIT, env)["aws_endpoint_url_s3"] == "http://10.0.0.1:9000"


def test_the_profiles_endpoint_and_services_section(tmp_path: Path) -> None:
    env = profile_files(
        tmp_path,
        "[profile dev]\nendpoint_url = http://global:1\nservices = local\n"
        "[services local]\ns3 =\n  endpoint_url = http://s3-only:2\n"
        "[profile plain]\nendpoint_url = http://plain:3\n"
        "[default]\nendpoint_url = http://default:4\n",
        "[plain]\naws_access_key_id = AKIA\naws_secret_access_key = secret\n",
    )
    settings = S3Settings()
    assert settings.endpoint_for(AWS, {**env, "AWS_PROFILE": "dev"}) == "http://s3-only:2"
    assert settings.endpoint_for(AWS, {**env, "AWS_PROFILE": "plain"}) == "http://plain:3"
    assert settings.endpoint_for(AWS, env) == "http://default:4"
    assert S3Settings(profile="plain").endpoint_for(AWS, env) == "http://plain:3"
    # The environment goes before any profile.
    assert (
        settings.endpoint_for(AWS, {**env, "AWS_PROFILE": "dev", "AWS_ENDPOINT_URL": "http://v:5"})
        == "http://v:5"
    )
    config = S3Settings(profile="plain").resolve(AWS, env)
    assert (config["access_key_id"], config["endpoint"]) == ("AKIA", "http://plain:3")


def test_configured_endpoints_can_be_ignored(tmp_path: Path) -> None:
    env = profile_files(tmp_path, "[default]\nendpoint_url = http://default:4\n")
    env["AWS_ENDPOINT_URL"] = "http://v:5"
    assert (
        S3Settings().endpoint_for(AWS, {**env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"})
        is None
    )
    ignoring = profile_files(
        tmp_path,
        "[default]\nendpoint_url = http://default:4\nignore_configured_endpoint_urls = true\n",
    )
    assert S3Settings().endpoint_for(AWS, ignoring) is None
    # ... but never the URL's own.
    assert S3Settings().endpoint_for(EXPLICIT, ignoring) == "http://10.0.0.1:9000"


@pytest.mark.parametrize("value", ["127.0.0.1:9000", "ftp://host", "http://", "http://h/?a=1"])
def test_a_malformed_endpoint_is_named(no_profile: dict[str, str], value: str) -> None:
    with pytest.raises(
        S3EndpointError, match=r"\$AWS_ENDPOINT_URL = .*http:// or https://|no query"
    ):
        S3Settings().endpoint_for(AWS, {**no_profile, "AWS_ENDPOINT_URL": value})
