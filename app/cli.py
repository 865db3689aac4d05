"""The ``session-memory`` command: serve, migrate, openapi, keys, export, import, tenants, sweep.

An error the operator can act on (a refusal, a missing session or key, an unreadable file, an
unreachable database, invalid settings) is one line on standard error, ``error: ...``, and exit
code 2, as argparse does for a bad command line. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.settings import Settings, get_settings

if TYPE_CHECKING:
    from app.domain.keys import ApiKey
    from app.store.db import Store

T = TypeVar("T")

EXIT_ERROR = 2


class CliError(Exception):
    """A refusal the operator can act on, worded for them."""


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    host = args.host or settings.host
    # The app factory (in this process and in each worker) decides about auth from HOST, and
    # lets AUTH__MODE=auto be off only in a server this command started (SERVE__VIA_CLI).
    os.environ["HOST"] = host
    os.environ["SERVE__VIA_CLI"] = "true"
    get_settings.cache_clear()
    settings = get_settings()
    refused = _auth_refusal(settings)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    port = args.port or settings.port
    _check_port_free(host, port)
    if settings.auto_migrate and not args.no_migrate:
        from app.store.migrate import upgrade

        upgrade(settings.database_url)
    refused = _no_keys_refusal(settings)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    if args.workers > 1 and settings.redis_url is None:
        print(
            "refusing to start several workers with the in-process lock: set REDIS_URL",
            file=sys.stderr,
        )
        return 2
    from app.logs import log_config

    metrics_dir = _prepare_metrics_dir(settings.prometheus_multiproc_dir, workers=args.workers)
    try:
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=args.workers,
            log_level=settings.log_level,
            log_config=log_config(settings.log_level, settings.log_format),
            access_log=False,  # app.access logs each request, with its id and duration
            proxy_headers=True,
            timeout_graceful_shutdown=30,
        )
    finally:
        if metrics_dir is not None and not settings.prometheus_multiproc_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def _check_port_free(host: str, port: int) -> None:
    """Refuse a taken address before migrating or starting: uvicorn would log "startup
    complete" first and then exit 3 on `address already in use`, naming no way out."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CliError(f"cannot listen on host {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As uvicorn binds: SO_REUSEADDR, so a port in TIME_WAIT after a stop is not "taken".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise CliError(
                f"port {port} on {host} is in use ({exc.strerror}; another server running?): "
                f"choose another with --port or the PORT setting, e.g. --port {port + 1}"
            ) from exc


def _prepare_metrics_dir(configured: str | None, *, workers: int) -> Path | None:
    """Worker processes share metrics through files in one directory, emptied at each start
    (stale files would resurrect a previous run's counts). Several workers and none configured:
    a temporary one, removed at exit."""
    if configured:
        path = Path(configured)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
    elif workers > 1:
        path = Path(tempfile.mkdtemp(prefix="session-memory-metrics-"))
    else:
        return None
    # prometheus_client reads the variable itself, in each worker process.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


def _auth_refusal(settings: Settings) -> str | None:
    from app.services.keys import startup_problem

    return startup_problem(settings)


def _no_keys_refusal(settings: Settings) -> str | None:
    """Off loopback with auth on and no bootstrap key, at least one key must exist."""
    from app.services.keys import auth_required, is_loopback, no_keys_problem

    if not auth_required(settings) or is_loopback(settings.host) or settings.auth.bootstrap_key:
        return None
    try:
        active = asyncio.run(_with_store(settings, _count_keys))
    except Exception as exc:  # the database is unreachable or not migrated
        return f"refusing to start: cannot check for API keys ({exc.__class__.__name__}: {exc})"
    return no_keys_problem(settings, active)


async def _with_store(settings: Settings, job: Callable[[Store], Awaitable[T]]) -> T:
    from app.store.db import Store

    store = Store.from_url(settings.database_url, pool_size=1, max_overflow=0)
    try:
        return await job(store)
    finally:
        await store.dispose()


async def _count_keys(store: Store) -> int:
    from app.store.keys import KeyRepository

    async with store.read() as db:
        return await KeyRepository(db).count_active()


def _keys(args: argparse.Namespace) -> int:
    """The operator's key management: straight to the database, any tenant."""
    from app.services import keys as service

    settings = get_settings()
    if settings.auto_migrate:
        from app.store.migrate import upgrade

        upgrade(settings.database_url)

    async def create(store: Store) -> int:
        scopes = frozenset(s.strip() for s in args.scopes.split(",") if s.strip())
        created = await service.insert_key(
            store,
            tenant_id=args.tenant,
            command=service.KeyCreateCommand(
                name=args.name, scopes=scopes, session_prefix=args.prefix
            ),
        )
        print(json.dumps(_key_json(created.key) | {"secret": created.secret}, indent=2))
        print("the secret is shown only now; store it safely", file=sys.stderr)
        if not service.auth_required(settings):
            print(
                f"warning: authentication is off for a server with these settings "
                f"(AUTH__MODE={settings.auth.mode}, HOST={settings.host}): it accepts any "
                f"request, with this key, another or none. Set AUTH__MODE=on to require keys.",
                file=sys.stderr,
            )
        return 0

    async def list_(store: Store) -> int:
        after: str | None = None
        listed = 0
        while True:
            rows, after = await service.list_keys(
                store,
                None,
                after_id=after,
                limit=1000,
                include_revoked=args.all,
                tenant_id=args.tenant,
            )
            for key in rows:
                print(json.dumps(_key_json(key)))
            listed += len(rows)
            if after is None:
                if not listed:  # standard output stays empty JSON lines; say it to the operator
                    which = f" for tenant {args.tenant}" if args.tenant else ""
                    hint = "" if args.all else " (--all includes revoked keys)"
                    print(f"no keys{which}{hint}", file=sys.stderr)
                return 0

    async def revoke(store: Store) -> int:
        key = await service.revoke_key(store, None, args.key_id)
        print(
            f"revoked {key.id} ({key.tenant_id}/{key.name}); other processes stop accepting "
            f"it within {settings.auth.cache_seconds:g} s",
            file=sys.stderr,
        )
        return 0

    job = {"create": create, "list": list_, "revoke": revoke}[args.keys_command]
    return asyncio.run(_with_store(settings, job))


def _key_json(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "tenant_id": key.tenant_id,
        "name": key.name,
        "scopes": sorted(key.scopes),
        "session_prefix": key.session_prefix,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def _transfer(args: argparse.Namespace) -> int:
    """export: snapshot a session and print its document; import: restore one into a session."""
    from app.locks import build_locks
    from app.services import transfer
    from app.services.runtime import Actor, Runtime

    settings = get_settings()
    if settings.auto_migrate:
        from app.store.migrate import upgrade

        upgrade(settings.database_url)
    actor = Actor(tenant_id=args.tenant, key_name="cli")
    document = _read_document(args.file) if args.command == "import" else None

    async def job(store: Store) -> dict[str, object]:
        locks = build_locks(
            settings.redis_url,
            wait_seconds=settings.lock.wait_seconds,
            ttl_seconds=settings.lock.ttl_seconds,
            socket_timeout=settings.lock.redis_timeout_seconds,
        )
        rt = Runtime(settings=settings, store=store, locks=locks)
        try:
            if document is None:
                return await transfer.export_session(rt, actor, args.session_id)
            return await transfer.import_session(
                rt, actor, args.session_id, document, create=not args.no_create
            )
        finally:
            await locks.close()

    result = asyncio.run(_with_store(settings, job))
    if document is not None:
        print(json.dumps(result))
        return 0
    text = json.dumps(result, indent=2, default=str) + "\n"
    if args.out:
        try:
            Path(args.out).write_text(text)
        except OSError as exc:
            raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0


def _retention(args: argparse.Namespace) -> int:
    """tenants erase / tenants storage / sweep: straight to the database, any tenant."""
    from app.locks import build_locks
    from app.services import retention
    from app.services.runtime import Actor, Runtime

    settings = get_settings()
    if settings.auto_migrate:
        from app.store.migrate import upgrade

        upgrade(settings.database_url)
    command = getattr(args, "tenants_command", None) or args.command
    if command == "erase" and not args.yes:
        raise CliError(f"erasing tenant {args.tenant_id!r} cannot be undone: add --yes")

    async def job(store: Store) -> dict[str, object]:
        locks = build_locks(
            settings.redis_url,
            wait_seconds=settings.lock.wait_seconds,
            ttl_seconds=settings.lock.ttl_seconds,
            socket_timeout=settings.lock.redis_timeout_seconds,
        )
        rt = Runtime(settings=settings, store=store, locks=locks)
        try:
            if command == "erase":
                erased = await retention.erase_tenant(
                    rt, args.tenant_id, key_id=None, key_name="cli"
                )
                return {
                    "tenant_id": args.tenant_id,
                    "sessions": erased.sessions,
                    "row_counts": erased.row_counts,
                    "erasure_id": erased.erasure_id,
                }
            if command == "storage":
                actor = Actor(tenant_id=args.tenant_id, key_name="cli")
                return await retention.tenant_storage(rt, actor, args.tenant_id)
            report = await retention.run_sweep(rt, claim=False)
            return {
                "sessions_expired": report.sessions_expired,
                "sessions_pruned": report.sessions_pruned,
                "rows": report.erased.rows,
                "bytes": report.erased.bytes,
                "seconds": round(report.seconds, 3),
            }
        finally:
            await locks.close()

    print(json.dumps(asyncio.run(_with_store(settings, job))))
    return 0


def _read_document(path: str) -> dict[str, object]:
    """The document to import, from a file or standard input (``-``)."""
    name = "standard input" if path == "-" else path
    try:
        if path == "-":
            document = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as source:
                document = json.load(source)
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, not UTF-8
        raise CliError(f"{name} is not a JSON document: {exc}") from None
    if not isinstance(document, dict):
        raise CliError(f"{name} is not an exported session document (a JSON object)")
    return document


def _migrate(_: argparse.Namespace) -> int:
    from app.store.migrate import upgrade

    settings = get_settings()
    upgrade(settings.database_url)
    print(f"migrated {settings.database_url.split('@')[-1]}")
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from app.main import create_app

    text = json.dumps(create_app().openapi(), indent=2, sort_keys=False) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


DESCRIPTION = """\
The Session Memory Service's command: run the server (serve), migrate the database, print the
OpenAPI document, manage API keys, export and import sessions, and erase tenants or run the
retention sweep (tenants, sweep). Every command reads the service's settings from the
environment (DATABASE_URL first of all; see docs/operations.md).

An error you can act on is one line on standard error, "error: ...", with exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-memory",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service (migrates first)")
    serve.add_argument("--host", default=None, help="default: HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: PORT or 8080")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="uvicorn worker processes (default 1; more than 1 needs REDIS_URL)",
    )
    serve.add_argument("--no-migrate", action="store_true", help="do not run migrations first")
    serve.set_defaults(func=_serve)

    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(func=_migrate)

    openapi = sub.add_parser("openapi", help="print the OpenAPI document")
    openapi.add_argument("--out", default=None, help="write to this file instead of stdout")
    openapi.set_defaults(func=_openapi)

    keys = sub.add_parser("keys", help="manage API keys (directly in the database)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print its secret (once)")
    create.add_argument("--tenant", required=True, help="the tenant the key belongs to")
    create.add_argument("--name", required=True, help="shown in events as the actor")
    create.add_argument("--scopes", required=True, help="comma-separated: read,write,admin")
    create.add_argument("--prefix", default=None, help="confine the key to these session ids")
    listing = keys_sub.add_parser("list", help="list keys as JSON lines (no secrets)")
    listing.add_argument("--tenant", default=None, help="default: every tenant")
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    keys.set_defaults(func=_keys)

    export = sub.add_parser("export", help="snapshot a session and print its document (JSON)")
    export.add_argument("session_id")
    export.add_argument(
        "--tenant", default="default", help="the session's tenant (default: default)"
    )
    export.add_argument("--out", default=None, help="write to this file instead of stdout")
    export.set_defaults(func=_transfer)

    import_ = sub.add_parser("import", help="restore a session from an exported document")
    import_.add_argument("session_id")
    import_.add_argument("file", help="the document (- for standard input)")
    import_.add_argument(
        "--tenant", default="default", help="the session's tenant (default: default)"
    )
    import_.add_argument("--no-create", action="store_true", help="fail if the session is missing")
    import_.set_defaults(func=_transfer)

    tenants = sub.add_parser("tenants", help="erase a tenant or see its storage (retention)")
    tenants_sub = tenants.add_subparsers(dest="tenants_command", required=True)
    erase = tenants_sub.add_parser(
        "erase", help="erase every session, key and record of a tenant (irreversible)"
    )
    erase.add_argument("tenant_id")
    erase.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    storage = tenants_sub.add_parser("storage", help="rows and bytes a tenant stores (JSON)")
    storage.add_argument("tenant_id")
    tenants.set_defaults(func=_retention)

    sweep = sub.add_parser("sweep", help="run the retention sweep once, now (JSON report)")
    sweep.set_defaults(func=_retention)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except Exception as exc:
        message = _error_line(exc)
        if message is None:
            raise  # a bug: its traceback is what a report needs
        print(f"error: {message}", file=sys.stderr)
        return EXIT_ERROR


def _error_line(exc: Exception) -> str | None:
    """One line for an error the operator can act on; None for a bug."""
    from pydantic import ValidationError
    from sqlalchemy import exc as sa_exc

    from app.domain.errors import DomainError

    if isinstance(exc, CliError):
        return str(exc)
    if isinstance(exc, DomainError):
        fields = "; ".join(
            f"{'.'.join(str(x) for x in err.get('loc', []))}: {err.get('msg')}"
            for err in exc.errors or []
        )
        return f"{exc.detail} ({fields})" if fields else exc.detail
    if isinstance(exc, sa_exc.DBAPIError):  # from a migration, before any store exists
        first = str(exc.orig).strip().splitlines() or [type(exc.orig).__name__]
        return f"the database refused or could not be reached: {first[0]}"
    if isinstance(exc, ValidationError):
        fields = "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        return f"invalid {exc.title}: {fields}"
    if isinstance(exc, OSError):  # e.g. export --out into a missing directory
        reason = exc.strerror or str(exc)
        return f"{reason}: {exc.filename}" if exc.filename else reason
    return None


if __name__ == "__main__":
    raise SystemExit(main())
