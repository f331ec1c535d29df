"""Opaque secrets (API tokens, session ids, link tokens) and password hashes.

Random secrets carry 256 bits, so a plain SHA-256 digest is a safe lookup key: no salt or slow
hash is needed (nothing to brute-force).  Passwords are people's choices and get argon2id.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
# Verifying against this when the user does not exist keeps the timing of "no such user" and
# "wrong password" alike.
_DUMMY_HASH = _hasher.hash("chatmem-timing-equaliser")


def new_secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False
