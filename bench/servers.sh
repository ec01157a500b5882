# shellcheck shell=bash
# Private MariaDB and PostgreSQL servers for bench/: source this file, then
#
#   mariadb_start    # sets MARIADB_PORT MARIADB_PID MARIADB_DIR MARIADB_URL
#   mariadb_stop     # stops that PID, waits for it, removes MARIADB_DIR
#   postgres_start   # sets POSTGRES_PORT POSTGRES_PID POSTGRES_DIR POSTGRES_URL
#   postgres_stop
#
# Each server gets a new temp dir and a free 127.0.0.1 port, the database `sbtest`
# and the user `sbtest` / password `sbtest` (PostgreSQL: owner of `sbtest`).
# Servers are only ever stopped by the PID these functions recorded.
#
# Server configuration (identical for every run, documented in docs/BENCHMARKS.md):
#   MariaDB:    --innodb-buffer-pool-size=512M --max-connections=600
#               --innodb-flush-log-at-trx-commit=2  (log written at commit, fsynced once a second)
#   PostgreSQL: max_connections=300 shared_buffers=256MB
#               synchronous_commit=off              (WAL flushed by the WAL writer, not at commit)
# Neither waits for the disk at commit, so the benchmarks measure the client/server
# CPU path and not this VM's fsync latency. Override with BENCH_MARIADB_OPTS /
# BENCH_POSTGRES_OPTS (extra arguments appended to the server command line).

BENCH_TMP=${BENCH_TMP:-/tmp}
BENCH_PG_BIN=${BENCH_PG_BIN:-}

_bench_log() { printf '[servers] %s\n' "$*" >&2; }

# A port nothing listens on right now (bind :0, read it, close).
bench_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

_bench_tcp_open() { # port
    python3 -c 'import socket,sys
s=socket.socket(); s.settimeout(0.5)
try: s.connect(("127.0.0.1",int(sys.argv[1])))
except OSError: sys.exit(1)' "$1"
}

_bench_pg_bin() {
    if [[ -n $BENCH_PG_BIN ]]; then echo "$BENCH_PG_BIN"; return; fi
    if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then echo /usr/lib/postgresql/15/bin; return; fi
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [[ -n $d ]] || { _bench_log "PostgreSQL binaries not found (apt-get install postgresql)"; return 1; }
    echo "$d"
}

# Wait (up to $3 s) for PID $1 to be alive and port $2 to accept connections.
_bench_wait_port() { # pid port timeout_s
    local pid=$1 port=$2 t=${3:-60} i
    for ((i = 0; i < t * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        _bench_tcp_open "$port" && return 0
        sleep 0.1
    done
    return 1
}

# Wait for PID $1 to exit (up to $2 s); it must be our child or at least ours to signal.
_bench_wait_gone() { # pid timeout_s
    local pid=$1 t=${2:-30} i
    for ((i = 0; i < t * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
        sleep 0.1
    done
    return 1
}

# ---------------------------------------------------------------------------
# MariaDB

mariadb_start() {
    local dir data run tmp port pid attempt
    dir=$(mktemp -d "$BENCH_TMP/bench-mariadb-XXXXXX") || return 1
    data=$dir/data run=$dir/run tmp=$dir/tmp
    mkdir -p "$data" "$run" "$tmp"
    local user_opt=()
    if [[ $(id -u) == 0 ]]; then
        chown -R mysql:mysql "$dir"
        user_opt=(--user=mysql)
    fi
    if ! mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$data" --tmpdir="$tmp" \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/install-db.log" 2>&1; then
        _bench_log "mariadb-install-db failed; see $dir/install-db.log"
        tail -20 "$dir/install-db.log" >&2
        return 1
    fi
    for attempt in 1 2 3; do
        port=$(bench_free_port)
        rm -f "$data/err.log"
        # shellcheck disable=SC2086
        mariadbd --no-defaults "${user_opt[@]}" --datadir="$data" --tmpdir="$tmp" \
            --bind-address=127.0.0.1 --port="$port" --socket="$run/s.sock" --pid-file="$run/p.pid" \
            --innodb-buffer-pool-size=512M --max-connections=600 \
            --innodb-flush-log-at-trx-commit=2 \
            --log-error="$data/err.log" ${BENCH_MARIADB_OPTS:-} \
            </dev/null >"$dir/mariadbd.out" 2>&1 &
        pid=$!
        if _bench_wait_port "$pid" "$port" 60; then
            local i
            for ((i = 0; i < 300; i++)); do
                grep -q "ready for connections" "$data/err.log" 2>/dev/null && break
                sleep 0.1
            done
            break
        fi
        if kill -0 "$pid" 2>/dev/null; then kill "$pid"; _bench_wait_gone "$pid" 30; fi
        wait "$pid" 2>/dev/null
        if grep -q "Address already in use" "$data/err.log" 2>/dev/null && ((attempt < 3)); then
            continue
        fi
        _bench_log "mariadbd did not start; tail of $data/err.log:"
        tail -20 "$data/err.log" >&2
        return 1
    done
    if ! mariadb --no-defaults --protocol=socket --socket="$run/s.sock" -uroot -e "
        CREATE DATABASE sbtest;
        CREATE USER 'sbtest'@'%' IDENTIFIED BY 'sbtest';
        CREATE USER 'sbtest'@'127.0.0.1' IDENTIFIED BY 'sbtest';
        CREATE USER 'sbtest'@'localhost' IDENTIFIED BY 'sbtest';
        GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'%';
        GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'127.0.0.1';
        GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'localhost';" >"$dir/admin.log" 2>&1; then
        _bench_log "creating db/user failed; see $dir/admin.log"
        cat "$dir/admin.log" >&2
        MARIADB_PID=$pid MARIADB_DIR=$dir mariadb_stop
        return 1
    fi
    MARIADB_DIR=$dir MARIADB_PORT=$port MARIADB_PID=$pid
    MARIADB_SOCKET=$run/s.sock
    MARIADB_URL="mysql://sbtest:sbtest@127.0.0.1:$port/sbtest"
    export MARIADB_DIR MARIADB_PORT MARIADB_PID MARIADB_SOCKET MARIADB_URL
    _bench_log "MariaDB $(mariadbd --version | awk '{print $3}') pid $pid on 127.0.0.1:$port ($dir)"
}

# Run SQL as root on the private MariaDB (over its socket).
mariadb_sql() {
    mariadb --no-defaults --protocol=socket --socket="$MARIADB_SOCKET" -uroot -N -B -e "$1"
}

mariadb_stop() {
    local pid=${MARIADB_PID:-} dir=${MARIADB_DIR:-}
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        if ! _bench_wait_gone "$pid" 60; then
            _bench_log "mariadbd $pid did not stop on SIGTERM; SIGKILL"
            kill -KILL "$pid" 2>/dev/null
            _bench_wait_gone "$pid" 10
        fi
        _bench_log "MariaDB pid $pid stopped"
    fi
    [[ -n $dir && -d $dir && $dir == "$BENCH_TMP"/bench-mariadb-* ]] && rm -rf "$dir"
    unset MARIADB_PID MARIADB_DIR MARIADB_PORT MARIADB_SOCKET MARIADB_URL
}

# ---------------------------------------------------------------------------
# PostgreSQL

_bench_as_postgres() { # command...
    if [[ $(id -u) == 0 ]]; then
        # setpriv execs in place (no forked parent), so $! is the server's own PID
        setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        "$@"
    fi
}

# exec form of _bench_as_postgres (replaces the calling subshell).
_bench_as_postgres_exec() {
    if [[ $(id -u) == 0 ]]; then
        exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        exec "$@"
    fi
}

postgres_start() {
    local bin dir data port pid attempt
    bin=$(_bench_pg_bin) || return 1
    dir=$(mktemp -d "$BENCH_TMP/bench-postgres-XXXXXX") || return 1
    data=$dir/data
    mkdir -p "$data"
    chmod 700 "$data"
    [[ $(id -u) == 0 ]] && chown -R postgres:postgres "$dir"
    if ! (cd "$dir" && _bench_as_postgres "$bin/initdb" -D "$data" -A trust -U postgres \
        --no-locale -E UTF8 --no-sync --no-instructions) >"$dir/initdb.log" 2>&1; then
        _bench_log "initdb failed; see $dir/initdb.log"
        tail -20 "$dir/initdb.log" >&2
        return 1
    fi
    for attempt in 1 2 3; do
        port=$(bench_free_port)
        # shellcheck disable=SC2086
        (cd "$dir" && _bench_as_postgres_exec "$bin/postgres" -D "$data" -p "$port" -k "$data" \
            -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=256MB \
            -c synchronous_commit=off ${BENCH_POSTGRES_OPTS:-}) \
            </dev/null >"$dir/postgres.log" 2>&1 &
        pid=$!
        if _bench_wait_port "$pid" "$port" 60; then
            local i
            for ((i = 0; i < 300; i++)); do
                "$bin/pg_isready" -q -h "$data" -p "$port" -U postgres -d postgres && break
                sleep 0.1
            done
            break
        fi
        if kill -0 "$pid" 2>/dev/null; then kill -INT "$pid"; _bench_wait_gone "$pid" 30; fi
        wait "$pid" 2>/dev/null
        if grep -q "Address already in use" "$dir/postgres.log" && ((attempt < 3)); then
            continue
        fi
        _bench_log "postgres did not start; tail of $dir/postgres.log:"
        tail -20 "$dir/postgres.log" >&2
        return 1
    done
    POSTGRES_DIR=$dir POSTGRES_PORT=$port POSTGRES_PID=$pid POSTGRES_SOCKET=$data
    if ! PGPASSWORD= psql -X -q -v ON_ERROR_STOP=1 -h "$data" -p "$port" -U postgres -d postgres \
        -c "CREATE ROLE sbtest LOGIN PASSWORD 'sbtest'" \
        -c "CREATE DATABASE sbtest OWNER sbtest" >"$dir/admin.log" 2>&1; then
        _bench_log "creating db/role failed; see $dir/admin.log"
        cat "$dir/admin.log" >&2
        postgres_stop
        return 1
    fi
    POSTGRES_URL="postgres://sbtest:sbtest@127.0.0.1:$port/sbtest"
    export POSTGRES_DIR POSTGRES_PORT POSTGRES_PID POSTGRES_SOCKET POSTGRES_URL
    _bench_log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') pid $pid on 127.0.0.1:$port ($dir)"
}

# Run SQL as postgres on the private PostgreSQL (over its socket).
postgres_sql() { # sql [db]
    psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$POSTGRES_SOCKET" -p "$POSTGRES_PORT" -U postgres \
        -d "${2:-sbtest}" -c "$1"
}

postgres_stop() {
    local pid=${POSTGRES_PID:-} dir=${POSTGRES_DIR:-}
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -INT "$pid" # fast shutdown
        if ! _bench_wait_gone "$pid" 60; then
            _bench_log "postgres $pid did not stop on SIGINT; SIGQUIT"
            kill -QUIT "$pid" 2>/dev/null
            _bench_wait_gone "$pid" 10
        fi
        _bench_log "PostgreSQL pid $pid stopped"
    fi
    [[ -n $dir && -d $dir && $dir == "$BENCH_TMP"/bench-postgres-* ]] && rm -rf "$dir"
    unset POSTGRES_PID POSTGRES_DIR POSTGRES_PORT POSTGRES_SOCKET POSTGRES_URL
}

# nginx (one worker, access log off) serving a 612-byte /index.html (as
# testkit's) from DIR on a free port, stub_status at /status, room for
# 12,000 connections; sets NGINX_PID (the master, leading its own process
# group) and NGINX_PORT.
nginx_start() { # dir
    local dir=$1 user=""
    mkdir -p "$dir"/{html,logs,tmp}
    python3 -c 'print("<!DOCTYPE html><html><body>" + "x" * 570 + "</body></html>")' >"$dir/html/index.html"
    [[ $(id -u) == 0 ]] && user="user root;"
    NGINX_PORT=$(bench_free_port)
    cat >"$dir/nginx.conf" <<CONF
$user
daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 12000; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    root $dir/html;
    location = /status { stub_status; }
  }
}
CONF
    setsid "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" \
        >"$dir/logs/stderr.log" 2>&1 &
    NGINX_PID=$!
    _bench_wait_port "$NGINX_PID" "$NGINX_PORT" 30 || { _bench_log "nginx did not start"; return 1; }
    _bench_log "nginx pid $NGINX_PID on port $NGINX_PORT"
}

# Stops nginx and its workers (its process group).
nginx_stop() {
    [[ -n ${NGINX_PID:-} ]] && kill -- -"$NGINX_PID" 2>/dev/null && _bench_wait_gone "$NGINX_PID" 10
    unset NGINX_PID NGINX_PORT
    return 0
}

# Stop whatever this shell started (for traps).
bench_stop_all() {
    [[ -n ${MARIADB_PID:-} ]] && mariadb_stop
    [[ -n ${POSTGRES_PID:-} ]] && postgres_stop
    [[ -n ${NGINX_PID:-} ]] && nginx_stop
    return 0
}
