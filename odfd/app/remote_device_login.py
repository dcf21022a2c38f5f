"""``odfd login URL --browser``: a token from the node's device login (RFC 8628, as kamu-cli's
``kamu login`` gets one), for nodes where an account signs in on a web page rather than with a
password here (a kamu node signing in through GitHub, or any odfd node: its ``/v/login``).

The node gives a device code and the page to sign in at; the user opens it, and the node is
polled at the interval it asked for until the sign-in is done, refused or expired."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from odfd.app.remote_login import RemoteLoginError

CLIENT_ID = "odfd"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
_SLOW_DOWN_SECONDS = 5  # RFC 8628 3.5: each slow_down adds 5 s to the interval
_TIMEOUT_SECONDS = 30.0


async def _post_form(url: str, form: dict[str, str]) -> tuple[int, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.post(url, data=form, allow_redirects=False) as reply,
        ):
            status = reply.status
            answer = await reply.json(content_type=None) if reply.content_length != 0 else None
    except (aiohttp.ClientError, TimeoutError) as err:
        raise RemoteLoginError(f"cannot reach {url}: {err or type(err).__name__}") from None
    except ValueError:
        answer = None
    return status, answer


async def device_token(
    base: str,
    announce: Callable[[str], None],
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> str:
    """A token from the node at ``base`` (its root URL) once the user signed in at the page
    ``announce`` is given."""
    status, started = await _post_form(
        base + "platform/token/device/authorization", {"client_id": CLIENT_ID}
    )
    if status != 200 or not isinstance(started, dict) or "device_code" not in started:
        raise RemoteLoginError(
            f"{base}: no device login there ({status}): log in with --user NAME instead"
        )
    code = str(started["device_code"])
    announce(f"{started['verification_uri']}?deviceCode={code}")
    interval = float(started.get("interval") or 5)
    deadline = time.monotonic() + float(started.get("expires_in") or 300)
    form = {"client_id": CLIENT_ID, "device_code": code, "grant_type": GRANT_TYPE}
    while True:
        status, answer = await _post_form(base + "platform/token/device", form)
        if status == 200 and isinstance(answer, dict) and "access_token" in answer:
            return str(answer["access_token"])
        refusal = answer.get("message") if isinstance(answer, dict) else None
        if refusal == "slow_down":
            interval += _SLOW_DOWN_SECONDS
        elif refusal != "authorization_pending":
            raise RemoteLoginError(f"{base}: the browser login failed ({status} {refusal})")
        if time.monotonic() + interval > deadline:
            raise RemoteLoginError(f"{base}: nobody signed in at the page in time: log in again")
        await sleep(interval)
