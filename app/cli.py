"""The ``session-memory`` command: serve, migrate, openapi."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.settings import get_settings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    if settings.auto_migrate and not args.no_migrate:
        from app.store.migrate import upgrade

        upgrade(settings.database_url)
    host = args.host or settings.host
    port = args.port or settings.port
    if args.workers > 1 and settings.redis_url is None:
        print(
            "refusing to start several workers with the in-process lock: set REDIS_URL",
            file=sys.stderr,
        )
        return 2
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        workers=args.workers,
        log_level=settings.log_level,
        proxy_headers=True,
        timeout_graceful_shutdown=30,
    )
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="session-memory", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service (migrates first)")
    serve.add_argument("--host", default=None, help="default: HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: PORT or 8080")
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--no-migrate", action="store_true", help="do not run migrations first")
    serve.set_defaults(func=_serve)

    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(func=_migrate)

    openapi = sub.add_parser("openapi", help="print the OpenAPI document")
    openapi.add_argument("--out", default=None, help="write to this file instead of stdout")
    openapi.set_defaults(func=_openapi)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
