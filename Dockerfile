# syntax=docker/dockerfile:1
# The service image: `session-memory serve` on Postgres + Redis, as an unprivileged user.
# Build: docker build -t session-memory .   Run it with docker-compose.yml (see
# docs/operations.md, "Deploy with Docker Compose").

# --- build: a virtualenv with the project and its dependencies --------------------------------
# Pinned by constraints.txt: the runtime versions the test suite passed with (scripts/lock-runtime
# regenerates it), never whatever is newest on the day of the build.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md constraints.txt ./
COPY app ./app
RUN /opt/venv/bin/pip install --no-cache-dir -c constraints.txt . \
    && /opt/venv/bin/python -m compileall -q /opt/venv/lib

# --- runtime: the virtualenv, the code and the migrations; no compilers, no pip cache ---------
FROM python:3.11-slim AS runtime
RUN groupadd --system --gid 10001 sm \
    && useradd --system --uid 10001 --gid sm --home-dir /srv --no-create-home --shell /usr/sbin/nologin sm
WORKDIR /srv
COPY --from=build /opt/venv /opt/venv
COPY alembic.ini ./
COPY migrations ./migrations
COPY app ./app
# /srv first on the path: `app` is imported from here, beside migrations/ (which
# app/store/migrate.py finds relative to the code).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/srv \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=8080 \
    LOG_FORMAT=json
USER 10001:10001
EXPOSE 8080
# Liveness only: readiness (database and Redis) is /readyz, for load balancers and operators.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8080'), timeout=2)"]
# SIGTERM: uvicorn stops accepting, finishes in-flight requests (up to 30 s), then exits.
STOPSIGNAL SIGTERM
CMD ["session-memory", "serve", "--no-migrate"]
