"""The reference's ``auth`` mutations, as the kamu web UI signs in: ``login`` checks a password as
``POST /platform/login`` does (the same credential document, the same throttle per name, the same
words for a refusal) and answers a token with its account; ``accountDetails`` names the account of
a token, refusing one the node does not accept in the words every route uses."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError, GraphQLResolveInfo

from odfd.app import graphql_catalog as catalog
from odfd.app.accounts import LoginRejected, account_for_token, login_with_password
from odfd.server.query_api.platform import PASSWORD_METHOD, login_credentials
from odfd.server.refusals import bad_token_words


async def login(
    _source: Any, info: GraphQLResolveInfo, loginMethod: str, loginCredentialsJson: str
) -> dict[str, Any]:
    if loginMethod != "PASSWORD":
        raise GraphQLError(f"unsupported loginMethod {loginMethod}: odfd supports PASSWORD")
    try:
        name, password = login_credentials(
            {"loginMethod": PASSWORD_METHOD, "loginCredentialsJson": loginCredentialsJson}
        )
    except ValueError as error:
        raise GraphQLError(str(error)) from None
    ctx = info.context  # ``resolvers.Context``: node and throttle
    key = name.lower()
    await ctx.throttle.wait_turn(key)
    try:
        issued = await login_with_password(ctx.node, name, password)
    except LoginRejected as error:
        ctx.throttle.failed(key)
        raise GraphQLError(f"Rejected credentials: {error}") from None
    ctx.throttle.succeeded(key)
    account = await account_for_token(ctx.node, issued.secret)
    assert account is not None, "a token just issued names its account"
    return {"accessToken": issued.secret, "account": catalog.account_facts(account)}


async def account_details(
    _source: Any, info: GraphQLResolveInfo, accessToken: str
) -> catalog.AccountFacts:
    node = info.context.node
    account = await account_for_token(node, accessToken)
    if account is None:
        raise GraphQLError(await bad_token_words(node.workspace, accessToken))
    return catalog.account_facts(account)
