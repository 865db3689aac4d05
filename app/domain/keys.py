"""API keys: what a key is, how its secret looks and is hashed, and what a key may grant.

A secret is ``smk_<12 hex>_<43 urlsafe chars>`` (32 random bytes); its first part
``smk_<12 hex>`` is the key's public id, safe to log and show. Only the SHA-256 of the whole
secret is stored: the secret carries 256 bits of entropy, so a fast hash is enough (there is no
password to brute-force).

Invariants:
- ``hash_secret`` is the one function that turns a secret into what the store keeps;
- a key can only grant what it holds: scopes that are a subset of its own, and a session prefix
  at least as narrow as its own (``check_grant``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from app.domain.errors import Forbidden, InvalidInput

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[str, ...] = get_args(Scope)
SECRET_PREFIX = "smk_"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
KEY_ID_PATTERN = r"^smk_[0-9a-f]{12}$"
# A key's name is shown in events: printable, no control characters, no surrounding blanks.
NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\s](?:[^\x00-\x1f\x7f-\x9f]{0,126}[^\x00-\x1f\x7f-\x9f\s])?$"
_TENANT_RE = re.compile(TENANT_PATTERN)
_NAME_RE = re.compile(NAME_PATTERN)
_SECRET_RE = re.compile(r"^[\x21-\x7e]{1,256}$")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key as stored (without its secret)."""

    id: str
    tenant_id: str
    name: str
    scopes: frozenset[str]
    session_prefix: str | None
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class NewSecret:
    key_id: str
    secret: str
    key_hash: str


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> NewSecret:
    key_id = SECRET_PREFIX + secrets.token_hex(6)
    secret = f"{key_id}_{secrets.token_urlsafe(32)}"
    return NewSecret(key_id=key_id, secret=secret, key_hash=hash_secret(secret))


def plausible_secret(value: str) -> bool:
    """Cheap syntax check before any lookup: visible ASCII, at most 256 characters."""
    return bool(_SECRET_RE.fullmatch(value))


def check_tenant(value: str) -> str:
    if not _TENANT_RE.fullmatch(value):
        raise InvalidInput(
            "invalid tenant id",
            errors=[{"loc": ["tenant"], "msg": f"tenant id must match {TENANT_PATTERN}"}],
        )
    return value


def check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise InvalidInput(
            "invalid key name",
            errors=[{"loc": ["name"], "msg": "1-128 printable characters, no surrounding blanks"}],
        )
    return value


def check_scopes(values: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    unknown = sorted(set(values) - set(SCOPES))
    if unknown or not values:
        raise InvalidInput(
            "invalid scopes",
            errors=[{"loc": ["scopes"], "msg": f"a non-empty subset of {', '.join(SCOPES)}"}],
        )
    return frozenset(values)


def check_grant(
    *,
    granter_scopes: frozenset[str],
    granter_prefix: str | None,
    scopes: frozenset[str],
    session_prefix: str | None,
) -> str | None:
    """The prefix the new key gets; raises ``Forbidden`` if it would exceed the granter's."""
    missing = sorted(scopes - granter_scopes)
    if missing:
        raise Forbidden(f"a key cannot grant scopes it does not hold: {', '.join(missing)}")
    if granter_prefix:
        if session_prefix is None:
            return granter_prefix
        if not session_prefix.startswith(granter_prefix):
            raise Forbidden(
                f"a key confined to {granter_prefix!r} can only grant prefixes inside it"
            )
    return session_prefix


def within_prefix(granter_prefix: str | None, key_prefix: str | None) -> bool:
    """Whether a key confined to ``granter_prefix`` may see a key confined to ``key_prefix``."""
    if not granter_prefix:
        return True
    return key_prefix is not None and key_prefix.startswith(granter_prefix)
