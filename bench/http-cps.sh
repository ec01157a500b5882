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
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

trap bench_stop_all EXIT
trap 'exit 130' INT TERM
nginx_start "$out/nginx"

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
