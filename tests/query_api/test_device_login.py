"""The reference's ``kamu login URL`` against an odfd node: its device login (RFC 8628 as
kamu-cli's api-server answers it) driven with the requests kamu-cli's login service sends (form
fields, ``client_id=kamu``), and its sign-in page filled in a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odfd.app.device_login import DeviceCodes, DeviceLoginError, Refusal, TooManyDeviceLogins
from odfd.app.node import open_node
from tests.cli.helpers import odfd_serve
from tests.console.browser import Browser

PASSWORD = "the admin's long passphrase"
GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``odfd serve`` of a workspace whose ``admin`` has a password: its URL."""
    root = tmp_path_factory.mktemp("device") / "ws"
    subprocess.run([sys.executable, "-m", "odfd.cli.main", "-q", "init", "--root", str(root)])

    async def prepare() -> None:
        from odfd.app.accounts import set_password

        async with await open_node(root) as opened:
            await set_password(opened, "admin", PASSWORD)

    asyncio.run(prepare())
    with odfd_serve(root) as (url, _):
        yield url


def _call(
    url: str, form: dict[str, str] | None = None, token: str | None = None
) -> tuple[int, Any]:
    data = None if form is None else urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status, body = reply.status, reply.read()
    except urllib.error.HTTPError as err:
        status, body = err.code, err.read()
    return status, json.loads(body) if body else None


def _poll(node: str, code: str, grant: str = GRANT) -> tuple[int, Any]:
    form = {"client_id": "kamu", "device_code": code, "grant_type": grant}
    return _call(node + "platform/token/device", form)


def test_kamu_login_signs_in_through_the_nodes_page(node: str) -> None:
    status, config = _call(node + "assets/runtime-config.json")
    assert (status, config) == (200, {"apiServerHttpUrl": node})
    api = config["apiServerHttpUrl"]
    status, started = _call(api + "platform/token/device/authorization", {"client_id": "kamu"})
    assert status == 200
    assert started["verification_uri"] == node + "v/login"
    assert (started["expires_in"], started["interval"], started["user_code"]) == (300, 5, "")
    code = started["device_code"]
    assert _poll(api, code) == (400, {"message": "authorization_pending"})

    browser = Browser()
    try:
        browser.open(f"{started['verification_uri']}?deviceCode={code}")  # as kamu-cli opens it
        browser.wait_for("form")
        browser.find("input[name=login]")[0].send_keys("admin")
        browser.find("input[name=password]")[0].send_keys("not the password")
        browser.find("button[type=submit]")[0].click()
        assert "Invalid login or password" in browser.wait_for("#error").text
        assert _poll(api, code) == (400, {"message": "authorization_pending"})
        browser.find("input[name=password]")[0].send_keys(PASSWORD)  # the name is kept
        browser.find("button[type=submit]")[0].click()
        assert "Signed in as admin" in browser.wait_for("#signed-in").text
        assert browser.console_errors() == []
        browser.screenshot("device-login-signed-in")
    finally:
        browser.close()

    status, granted = _poll(api, code)
    assert status == 200, granted
    assert (granted["token_type"], granted["expires_in"]) == ("Bearer", 30 * 24 * 3600)
    token = granted["access_token"]
    assert _call(api + "platform/token/validate", token=token)[0] == 200
    assert _call(api + "accounts/me", token=token)[1]["accountName"] == "admin"
    assert _poll(api, code) == (400, {"message": "access_denied"})  # handed out once


def test_a_poll_is_refused_with_the_references_codes(node: str) -> None:
    status, started = _call(node + "platform/token/device/authorization", {"client_id": "kamu"})
    code = started["device_code"]
    assert _poll(node, code, grant="password") == (400, {"message": "invalid_grant"})
    assert _poll(node, "not-a-uuid") == (400, {"message": "Invalid device_code"})
    unknown = "00000000-0000-4000-8000-000000000000"
    assert _poll(node, unknown) == (400, {"message": "access_denied"})
    missing = _call(node + "platform/token/device", {"client_id": "kamu", "device_code": code})
    assert missing == (400, {"message": "missing form field `grant_type`"})
    empty = _call(node + "platform/token/device/authorization", {"client_id": ""})
    assert empty == (400, {"message": "Invalid client_id"})
    assert _poll(node, code) == (400, {"message": "authorization_pending"})  # still waits


def test_the_page_refuses_a_code_it_did_not_hand_out(node: str) -> None:
    request = urllib.request.Request(node + "v/login?deviceCode=made-up")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "unknown or already used device code" in refused.value.read().decode()


def test_a_device_code_expires_after_its_lifetime() -> None:
    now = [1000.0]
    codes = DeviceCodes(lifetime=300, clock=lambda: now[0])
    code = codes.create()
    codes.check(code)
    now[0] += 300
    with pytest.raises(DeviceLoginError) as expired:
        codes.check(code)
    assert expired.value.refusal is Refusal.EXPIRED
    with pytest.raises(DeviceLoginError) as gone:
        codes.check(code)
    assert gone.value.refusal is Refusal.DENIED


def test_device_codes_awaiting_a_sign_in_are_bounded() -> None:
    """Anyone may ask for a code: at most ``most`` wait at once; expired ones make room."""
    now = [0.0]
    codes = DeviceCodes(lifetime=300, most=2, clock=lambda: now[0])
    codes.create()
    now[0] += 100
    codes.create()
    with pytest.raises(TooManyDeviceLogins, match="2 device logins await their sign-in"):
        codes.create()
    now[0] += 250  # the first expired
    codes.check(codes.create())
