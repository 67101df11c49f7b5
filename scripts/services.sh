#!/usr/bin/env bash
# Throwaway Redis and PostgreSQL servers on loopback for the test suite.
#
# Source it, then call `services_start`: it starts redis-server (no persistence, daemonized) and a
# fresh PostgreSQL cluster (initdb + pg_ctl, trust auth on 127.0.0.1, run as the postgres user when
# we are root), both on free ports, exports PROVENANCE_TEST_REDIS_URL and
# PROVENANCE_TEST_POSTGRES_URL, and installs an EXIT trap that stops both and removes their files.
# `services_stop` stops them explicitly. Run directly (`./scripts/services.sh CMD…`) it starts the
# servers, runs CMD with the variables set, and stops them.

_services_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_services_pg_bin() {
    local name="$1" found
    found="$(command -v "$name" 2>/dev/null || true)"
    if [ -z "$found" ]; then
        found="$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)"
    fi
    [ -n "$found" ] || { echo "services.sh: $name not found (install the Debian package postgresql)" >&2; return 1; }
    echo "$found"
}

services_stop() {
    if [ -n "${_SERVICES_PG_DIR:-}" ] && [ -d "$_SERVICES_PG_DIR" ]; then
        if [ -f "$_SERVICES_PG_DIR/data/postmaster.pid" ]; then
            $_SERVICES_AS "$(_services_pg_bin pg_ctl)" -D "$_SERVICES_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$_SERVICES_PG_DIR"
    fi
    if [ -n "${_SERVICES_REDIS_DIR:-}" ] && [ -d "$_SERVICES_REDIS_DIR" ]; then
        if [ -f "$_SERVICES_REDIS_DIR/redis.pid" ]; then
            kill "$(cat "$_SERVICES_REDIS_DIR/redis.pid")" 2>/dev/null || true
        fi
        rm -rf "$_SERVICES_REDIS_DIR"
    fi
    _SERVICES_PG_DIR=""
    _SERVICES_REDIS_DIR=""
}

services_start() {
    trap services_stop EXIT
    _SERVICES_AS=""
    if [ "$(id -u)" -eq 0 ]; then
        _SERVICES_AS="runuser -u postgres --"
    fi

    # Redis: loopback, no RDB snapshots, no AOF, daemonized with a pid file.
    local redis_port
    redis_port="$(_services_free_port)"
    _SERVICES_REDIS_DIR="$(mktemp -d -t provenance-redis-XXXXXX)"
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
        --dir "$_SERVICES_REDIS_DIR" --pidfile "$_SERVICES_REDIS_DIR/redis.pid" \
        --logfile "$_SERVICES_REDIS_DIR/redis.log"
    for _ in $(seq 1 100); do
        redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null
    export PROVENANCE_TEST_REDIS_URL="redis://127.0.0.1:$redis_port/0"

    # PostgreSQL: a fresh cluster in a temporary directory, loopback only, trust auth.
    local pg_port initdb pg_ctl
    initdb="$(_services_pg_bin initdb)"
    pg_ctl="$(_services_pg_bin pg_ctl)"
    pg_port="$(_services_free_port)"
    _SERVICES_PG_DIR="$(mktemp -d -t provenance-pg-XXXXXX)"
    chmod 700 "$_SERVICES_PG_DIR"
    [ -z "$_SERVICES_AS" ] || chown postgres:postgres "$_SERVICES_PG_DIR"
    $_SERVICES_AS "$initdb" -D "$_SERVICES_PG_DIR/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
    $_SERVICES_AS "$pg_ctl" -D "$_SERVICES_PG_DIR/data" -l "$_SERVICES_PG_DIR/log" -w -t 60 \
        -o "-p $pg_port -k $_SERVICES_PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200" \
        start >/dev/null
    export PROVENANCE_TEST_POSTGRES_URL="postgresql+asyncpg://postgres@127.0.0.1:$pg_port/postgres"
    echo "services: redis on 127.0.0.1:$redis_port, postgres on 127.0.0.1:$pg_port" >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    services_start
    "$@"
fi
