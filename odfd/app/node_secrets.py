"""Secrets kept by the node only encrypted: JWE (RFC 7516, compact form) to the node's own key.

The key is the X25519 form of the node's ed25519 identity key (``storage.keys``, named by the
node's ``did:key``), converted by libsodium; values are encrypted with ``ECDH-ES+A256KW`` and
``A256GCM`` through ``joserfc``. Because the public half follows from the node's DID, anyone can
encrypt a secret for a node (``odfd secrets key`` prints its public JWK, ``odfd secrets encrypt
--key`` encrypts to it without the node) and put the JWE in a manifest; only that node can read it. Plain values never leave this module except to the code that uses them.
"""

from __future__ import annotations

import base64
import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from joserfc import jwe
from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

from odfd.errors import OdfdError
from storage.keys import KeyStore

CONTENT_ENCODING = "jwe"
_HEADER = {"alg": "ECDH-ES+A256KW", "enc": "A256GCM"}


class SecretError(OdfdError):
    """A secret that this node cannot decrypt (never carries the value)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class NodeSecrets:
    keys: KeyStore

    @cached_property
    def _private(self) -> OKPKey:
        private = self.keys.node_key().to_curve25519_private_key()
        return OKPKey.import_key(
            {
                "kty": "OKP",
                "crv": "X25519",
                "x": _b64(bytes(private.public_key)),
                "d": _b64(bytes(private)),
            }
        )

    def public_jwk(self) -> dict[str, Any]:
        """The node's public encryption key, to encrypt secrets for it elsewhere."""
        jwk: dict[str, Any] = self._private.as_dict(private=False)
        return jwk

    def encrypt(self, plain: str) -> str:
        return jwe.encrypt_compact(_HEADER, plain.encode(), self._private)

    def decrypt(self, token: str) -> str:
        try:
            return jwe.decrypt_compact(token, self._private).plaintext.decode()  # type: ignore[union-attr]
        except (JoseError, ValueError, UnicodeDecodeError) as err:
            raise SecretError(
                f"not a JWE this node can decrypt ({type(err).__name__}: {err}); encrypt it to "
                "this node's public key, or give the plain value to have the node encrypt it"
            ) from None


def encrypt_to(public_jwk: Any, plain: str) -> str:
    """``plain`` as a JWE only the node whose public JWK (``NodeSecrets.public_jwk``) this is can
    decrypt: how a publisher keeps a secret out of manifests and repositories without the node.
    Raises ``SecretError`` for anything but an X25519 public key."""
    if not isinstance(public_jwk, dict) or public_jwk.get("kty") != "OKP":
        raise SecretError('not a node\'s public key: expected a JWK object with "kty": "OKP"')
    if public_jwk.get("crv") != "X25519":
        raise SecretError(
            f'not a node\'s public key: "crv" is {public_jwk.get("crv")!r}, expected "X25519"'
        )
    if "d" in public_jwk:
        raise SecretError(
            'this JWK holds a private key ("d"); give the public key `odfd secrets key` prints'
        )
    try:
        key = OKPKey.import_key(public_jwk)
    except (JoseError, ValueError, TypeError) as err:
        raise SecretError(f"not a node's public key ({type(err).__name__}: {err})") from None
    return jwe.encrypt_compact(_HEADER, plain.encode(), key)


_OF_KEYS: weakref.WeakKeyDictionary[KeyStore, NodeSecrets] = weakref.WeakKeyDictionary()


def node_secrets(keys: KeyStore) -> NodeSecrets:
    """The secrets of the node whose keys are ``keys``, one per key store: its key is read and
    converted once, not on every apply."""
    found = _OF_KEYS.get(keys)
    if found is None:
        found = _OF_KEYS[keys] = NodeSecrets(keys)
    return found
