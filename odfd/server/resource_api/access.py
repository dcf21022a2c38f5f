"""Who may use the resource protocol: the node's one authorization decision
(:meth:`~odfd.app.authorization.Policy.decide_account`) asked about the account a request acts
upon (``?account=``, else the token's own).

Reading an account's resources needs read on that account (the account itself, any role in an
organisation, or a ``[server] read_tokens`` token for the built-in account's); applying or
deleting needs the owner role on it (the account itself, an organisation's owners); a node admin
may do both on every account. A ``[server] push_tokens`` token may do neither. Anonymous clients
get 401 (the reference's ``No authentication token provided``): resources are never public.
Secrets come back only as the ciphertext the node stored."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.resource_service import AccountDid, AccountScope, account_scope
from odfd.app.resources import DEFAULT_ACCOUNT, account_handle
from odfd.server.refusals import NO_TOKEN
from odfd.server.state import STATE_KEY
from protocol.identity import AccountName


@dataclass(frozen=True, slots=True)
class Requester:
    account: AccountName | None
    """The token's account (None: the node's own, the built-in account)."""
    scope: AccountScope
    """The account the request acts upon, which the decision allowed."""


@dataclass(frozen=True, slots=True)
class Denied(Exception):
    status: int
    """401: no usable token; 403: a token that may not do this."""
    message: str


RULE = (
    "a token acts on its own account's resources, on an organisation's by its role there "
    "(reading needs any role, changing needs owner), and on every account's as a node admin"
)


class ResourceAccess:
    async def authorize(self, request: web.Request, *, write: bool) -> Requester:
        """Who asks and the account scope they may act upon, or :class:`Denied`."""
        state = request.app[STATE_KEY]
        principal = state.principal(request)
        if principal.account is None:
            raise Denied(401, NO_TOKEN)
        name = AccountName(principal.account)
        own = None if name == DEFAULT_ACCOUNT else name
        scope = account_scope(request.query.get("account"), own)
        action = Action.ADMIN if write else Action.READ
        target = _account(state.policy(request).account_roles, principal.account, scope)
        decision = state.decide_account(request, action, target)
        if not decision.allowed:
            verb = "change" if write else "read"
            raise Denied(
                403,
                f"{principal.label} may not {verb} the resources of {target} ({RULE}); "
                f"why: {decision.reason}",
            )
        return Requester(own, scope)


def _account(organisations: dict[str, dict[str, str]], subject: str, scope: AccountScope) -> str:
    """The name of the account ``scope`` names. A DID is matched against the accounts the
    subject has a role on; one that matches none stays a DID, which no account name equals (only
    a node admin may then act on it)."""
    if not isinstance(scope, AccountDid):
        return str(scope or DEFAULT_ACCOUNT).lower()
    candidates = [subject] + [org for org, members in organisations.items() if subject in members]
    for candidate in candidates:
        if str(account_handle(AccountName(candidate)).did) == scope.did:
            return candidate
    return scope.did
