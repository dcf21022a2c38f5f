"""``/v/login?deviceCode=…``: the page a device login (``kamu login URL``) sends the user's
browser to, where the reference's web front end has its own. A plain form, no script: the
account name and password, checked as ``POST /platform/login`` checks them (throttled per name),
sign the device code in; the CLI's next poll then gets the token."""

from __future__ import annotations

from html import escape

from aiohttp import web

from odfd.app.accounts import LoginRejected
from odfd.app.device_login import DeviceLoginError
from odfd.server.query_api import context
from odfd.server.query_api.device import DEVICE_CODES_KEY
from odfd.server.query_api.platform import THROTTLE_KEY

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}"
    "label{display:block;margin:.8rem 0}input{display:block;width:100%;padding:.4rem}"
    "button{margin-top:1rem;padding:.5rem 1.2rem}.error{color:#b00020}"
)


def _page(status: int, title: str, body: str) -> web.Response:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta name="viewport" content="width=device-width"><link rel="icon" href="data:,">'
        f"<style>{_STYLE}</style></head>"
        f"<body><h1>{title}</h1>{body}</body></html>"
    )
    return web.Response(status=status, text=html, content_type="text/html")


def _form(request: web.Request, code: str, error: str = "", login: str = "") -> str:
    problem = f'<p class="error" id="error">{escape(error)}</p>' if error else ""
    return (
        f"<p>A command line (<code>kamu login</code>) asks to act as your account on "
        f"{escape(context.base_url(request))}. Sign in to let it.</p>{problem}"
        '<form method="post" action="login">'
        f'<input type="hidden" name="deviceCode" value="{escape(code)}">'
        f'<label>Account <input name="login" value="{escape(login)}" autocomplete="username" '
        "required autofocus></label>"
        '<label>Password <input name="password" type="password" '
        'autocomplete="current-password" required></label>'
        '<button type="submit">Sign in</button></form>'
    )


def _refused(err: DeviceLoginError) -> web.Response:
    return _page(
        400, "This login link cannot be used", f"<p>{escape(str(err))}: run the login again.</p>"
    )


async def show(request: web.Request) -> web.Response:
    code = request.query.get("deviceCode", "")
    try:
        request.app[DEVICE_CODES_KEY].check(code)
    except DeviceLoginError as err:
        return _refused(err)
    return _page(200, "Sign in", _form(request, code))


async def submit(request: web.Request) -> web.Response:
    form = await request.post()
    code, login, password = (
        str(form.get(name, "")) for name in ("deviceCode", "login", "password")
    )
    throttle = request.app[THROTTLE_KEY]
    key = login.lower()
    await throttle.wait_turn(key)
    try:
        account = await request.app[DEVICE_CODES_KEY].sign_in(
            context.node(request), code, login, password
        )
    except DeviceLoginError as err:
        return _refused(err)
    except LoginRejected:
        throttle.failed(key)
        form_again = _form(request, code, "Invalid login or password.", login)
        return _page(200, "Sign in", form_again)  # the page is the answer, not an API's
    throttle.succeeded(key)
    return _page(
        200,
        "Signed in",
        f'<p id="signed-in">Signed in as <b>{escape(account)}</b>. '
        "Return to your terminal: the login finishes there.</p>",
    )
