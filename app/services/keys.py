"""API key use cases: create, list, revoke; resolving a presented secret to its key; and the
rules for when authentication is on.

When auth is on (``AUTH__MODE``):

- ``on``: always; ``off``: never, and only allowed on a loopback host (127.0.0.0/8, ::1,
  ``localhost``); ``auto`` (default): off on a loopback host without a bootstrap key, on
  otherwise. Keys created with the CLI do not switch ``auto`` on by themselves: set
  ``AUTH__MODE=on`` (or a bootstrap key) to require them on loopback.

The bootstrap key (``AUTH__BOOTSTRAP_KEY``) is hashed at start and compared in memory; it is
never written to the database, cannot be listed or revoked through the API, and is rotated by
changing the variable and restarting. It has every scope in ``AUTH__BOOTSTRAP_TENANT``.

Lookups are cached in-process for ``AUTH__CACHE_SECONDS`` (default 5 s): a revocation through
this process's admin API is immediate here, and visible to other processes within that time.
Unknown secrets are never cached (a new key works at once everywhere).
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from app.domain.errors import InvalidInput, KeyNotFound
from app.domain.ids import SESSION_PREFIX_RULE, is_valid_session_prefix
from app.domain.keys import (
    SCOPES,
    ApiKey,
    NewSecret,
    check_grant,
    check_name,
    check_scopes,
    check_tenant,
    hash_secret,
    new_secret,
    plausible_secret,
    within_prefix,
)
from app.services.runtime import Actor, utcnow
from app.settings import AuthSettings, Settings
from app.store.db import Store
from app.store.keys import KeyRepository
from app.store.retention import RetentionRepository

BOOTSTRAP_KEY_ID = "bootstrap"


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def auth_required(settings: Settings, *, built_by_asgi_server: bool = False) -> bool:
    """Whether /v1 requests need a key. ``auto`` is off on a loopback host with no bootstrap key,
    as the settings say. ``built_by_asgi_server``: an ASGI server built the app from the
    environment (``create_app()`` with no settings, as ``uvicorn --factory`` and gunicorn do);
    HOST then says nothing about where it listens, so ``auto`` is off only when our own
    ``session-memory serve`` started that server on loopback (``SERVE__VIA_CLI``)."""
    mode = settings.auth.mode
    if mode == "auto":
        if built_by_asgi_server and not settings.serve.via_cli:
            return True
        return not is_loopback(settings.host) or settings.auth.bootstrap_key is not None
    return mode == "on"


def startup_problem(settings: Settings) -> str | None:
    """Why the service must not start with these settings (None if it may)."""
    if settings.auth.mode == "off" and not is_loopback(settings.host):
        return (
            f"refusing to start: AUTH__MODE=off is only allowed on a loopback host, and HOST is "
            f"{settings.host!r}. Listen on 127.0.0.1 or turn authentication on."
        )
    return None


def no_keys_problem(settings: Settings, active_keys: int) -> str | None:
    """Off loopback with auth on, the service needs a key to be usable at all."""
    if (
        auth_required(settings)
        and not is_loopback(settings.host)
        and settings.auth.bootstrap_key is None
        and active_keys == 0
    ):
        return (
            f"refusing to start: listening on {settings.host!r} requires API keys and there are "
            "none. Set AUTH__BOOTSTRAP_KEY (and AUTH__BOOTSTRAP_TENANT), or create one with "
            "`session-memory keys create --tenant T --name N --scopes admin,read,write`."
        )
    return None


def actor_for(key: ApiKey, *, request_id: str | None) -> Actor:
    return Actor(
        tenant_id=key.tenant_id,
        key_name=key.name,
        key_id=key.id,
        request_id=request_id,
        scopes=key.scopes,
        session_prefix=key.session_prefix,
    )


class KeyResolver:
    """Secret -> active key: the bootstrap key in memory, the others through a short cache."""

    def __init__(
        self,
        store: Store,
        settings: AuthSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ttl = settings.cache_seconds
        self.max_keys = settings.cache_max_keys
        self.clock = clock
        self._cache: dict[str, tuple[float, ApiKey]] = {}
        self._bootstrap: tuple[str, ApiKey] | None = None
        if settings.bootstrap_key is not None:
            self._bootstrap = (
                hash_secret(settings.bootstrap_key.get_secret_value()),
                ApiKey(
                    id=BOOTSTRAP_KEY_ID,
                    tenant_id=settings.bootstrap_tenant,
                    name="bootstrap",
                    scopes=frozenset(SCOPES),
                    session_prefix=None,
                    created_at=utcnow(),
                ),
            )

    async def resolve(self, secret: str) -> ApiKey | None:
        if not plausible_secret(secret):
            return None
        digest = hash_secret(secret)
        if self._bootstrap and hmac.compare_digest(digest, self._bootstrap[0]):
            return self._bootstrap[1]
        now = self.clock()
        cached = self._cache.get(digest)
        if cached and cached[0] > now:
            key = cached[1]
        else:
            async with self.store.read() as db:
                found = await KeyRepository(db).by_hash(digest)
            if found is None:
                return None
            key = found
            if self.ttl > 0:
                if len(self._cache) >= self.max_keys:
                    self._cache.clear()
                self._cache[digest] = (now + self.ttl, key)
        return key if key.active else None

    def forget(self, key_id: str) -> None:
        for digest, (_, key) in list(self._cache.items()):
            if key.id == key_id:
                del self._cache[digest]


@dataclass(frozen=True, slots=True)
class CreatedKey:
    key: ApiKey
    secret: str


@dataclass(frozen=True, slots=True)
class KeyCreateCommand:
    name: str
    scopes: frozenset[str]
    session_prefix: str | None = None


def _check_prefix(prefix: str | None) -> str | None:
    if prefix is None or prefix == "":
        return None
    if not is_valid_session_prefix(prefix):
        raise InvalidInput(
            f"invalid session prefix: {SESSION_PREFIX_RULE}",
            errors=[{"loc": ["session_prefix"], "msg": SESSION_PREFIX_RULE}],
        )
    return prefix


async def insert_key(
    store: Store, *, tenant_id: str, command: KeyCreateCommand, now: datetime | None = None
) -> CreatedKey:
    """Store a new key for ``tenant_id`` (no permission check: the CLI's path, and the API's
    after ``create_key`` checked the grant)."""
    check_tenant(tenant_id)
    made: NewSecret = new_secret()
    key = ApiKey(
        id=made.key_id,
        tenant_id=tenant_id,
        name=check_name(command.name),
        scopes=check_scopes(command.scopes),
        session_prefix=_check_prefix(command.session_prefix),
        created_at=now or utcnow(),
    )
    async with store.write() as db:
        # a tenant being erased (or erased moments ago) takes no new key: it would write again
        await RetentionRepository(db).check_tenant_writable(tenant_id)
        await KeyRepository(db).insert(key, key_hash=made.key_hash)
    return CreatedKey(key=key, secret=made.secret)


async def create_key(store: Store, actor: Actor, command: KeyCreateCommand) -> CreatedKey:
    """A key in the caller's tenant, granting no more than the caller holds."""
    scopes = check_scopes(command.scopes)
    prefix = check_grant(
        granter_scopes=actor.scopes,
        granter_prefix=actor.session_prefix,
        scopes=scopes,
        session_prefix=_check_prefix(command.session_prefix),
    )
    return await insert_key(
        store,
        tenant_id=actor.tenant_id,
        command=KeyCreateCommand(name=command.name, scopes=scopes, session_prefix=prefix),
    )


async def list_keys(
    store: Store,
    actor: Actor | None,
    *,
    after_id: str | None,
    limit: int,
    include_revoked: bool = False,
    tenant_id: str | None = None,
) -> tuple[list[ApiKey], str | None]:
    """A page of keys and the id to continue after (None at the end).

    ``actor`` None is the operator (CLI): every tenant, or ``tenant_id``.
    """
    tenant = actor.tenant_id if actor else tenant_id
    prefix = actor.session_prefix if actor else None
    async with store.read() as db:
        rows = await KeyRepository(db).list(
            tenant,
            after_id=after_id,
            limit=limit + 1,
            include_revoked=include_revoked,
            prefix=prefix,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more and rows else None)


async def revoke_key(
    store: Store, actor: Actor | None, key_id: str, *, resolver: KeyResolver | None = None
) -> ApiKey:
    """Revoke a key (idempotent); ``KeyNotFound`` for another tenant's or a hidden key."""
    tenant = actor.tenant_id if actor else None
    async with store.write() as db:
        repo = KeyRepository(db)
        key = await repo.get(tenant, key_id)
        if key is None or (actor and not within_prefix(actor.session_prefix, key.session_prefix)):
            raise KeyNotFound(f"key {key_id!r} not found")
        await repo.revoke(tenant, key_id, now=utcnow())
        revoked = await repo.get(tenant, key_id)
    if resolver is not None:
        resolver.forget(key_id)
    assert revoked is not None
    return revoked
