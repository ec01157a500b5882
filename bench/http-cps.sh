#!/usr/bin/env bash
# New connections per second (CPS) against wrk with 'Connection: close' and
# ab without -k, on the same private nginx, and the memory loadcell spends
# per held idle connection at 10,000 connections (see docs/BENCHMARKS.md,
# "HTTP connections (issue 16)").
#
#   cargo build --release && bench/http-cps.sh
#
# Environment (defaults in brackets):
#   BENCH_TIME  seconds per run [10]   BENCH_REPS [3]
#   BENCH_HOLD  connections held for the memory figure [10000]
#   LOADCELL    binary to test [target/release/loadcell]
#
# nginx: one worker, access log off, worker_connections 12000,
# worker_rlimit_nofile 20000, backlog 4096; GET /index.html (612 bytes).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/release/loadcell}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2; exit 1; }
for bin in nginx wrk ab; do
    command -v $bin >/dev/null || { echo "$bin not installed (scripts/install-test-deps.sh)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-http-cps
mkdir -p "$out"/nginx/{html,logs,tmp}
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

NGINX_PORT=$(bench_free_port)
head -c 612 /dev/zero | tr '\0' x >"$out/nginx/html/index.html"
user=""; [[ $(id -u) == 0 ]] && user="user root;"
cat >"$out/nginx/nginx.conf" <<CONF
$user
daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $out/nginx/nginx.pid;
error_log $out/nginx/logs/error.log warn;
events { worker_connections 12000; }
http {
  access_log off;
  client_body_temp_path $out/nginx/tmp/body;
  proxy_temp_path $out/nginx/tmp/proxy;
  fastcgi_temp_path $out/nginx/tmp/fcgi;
  uwsgi_temp_path $out/nginx/tmp/uwsgi;
  scgi_temp_path $out/nginx/tmp/scgi;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    root $out/nginx/html;
    location = /status { stub_status; }
  }
}
CONF
setsid nginx -p "$out/nginx" -c "$out/nginx/nginx.conf" >"$out/nginx/logs/stderr.log" 2>&1 &
NGINX_PID=$!
# nginx's workers share its process group: stop them all, by that group.
stop_nginx() { kill -- -"$NGINX_PID" 2>/dev/null && _bench_wait_gone "$NGINX_PID" 10; return 0; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
_bench_wait_port "$NGINX_PID" "$NGINX_PORT" 30 || { echo "nginx did not start" >&2; exit 1; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "ip_local_port_range: $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' ' ')"
    echo "tcp_tw_reuse: $(cat /proc/sys/net/ipv4/tcp_tw_reuse)"
    echo "ulimit -Hn: $(ulimit -Hn)"
    echo "nginx: $(nginx -v 2>&1)"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "ab: $(ab -V | head -1)"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/http_cps.py --outdir "$out" --loadcell "$out/loadcell" \
    --port "$NGINX_PORT" --nginx-pid "$NGINX_PID" \
    --time "${BENCH_TIME:-10}" --reps "${BENCH_REPS:-3}" --hold "${BENCH_HOLD:-10000}"
echo "results: $out" >&2
