#!/usr/bin/env bash
# Key-value peers vs loadcell, side by side on the same private servers
# (see docs/BENCHMARKS.md): redis-benchmark (and memtier_benchmark when it is
# on PATH) against redis-server, memaslap against memcached.
#
#   cargo build --release && bench/kv.sh
#
# Environment (defaults in brackets):
#   BENCH_TIME  seconds per loadcell/memaslap run [10]   BENCH_REPS [3]
#   BENCH_REQUESTS  redis-benchmark requests per command at pipeline 1 [1000000]
#   LOADCELL    binary to test [target/release/loadcell]
#
# Servers (identical for every tool): redis-server --save '' --appendonly no,
# memcached -m 512 -t 1; each on a free 127.0.0.1 port, stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/release/loadcell}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2; exit 1; }
for bin in redis-server redis-benchmark memcached; do
    command -v $bin >/dev/null || { echo "$bin not installed (scripts/install-test-deps.sh)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-kv
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

pids=()
stop_servers() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null && _bench_wait_gone "$p" 10; done; return 0; }
trap stop_servers EXIT
trap 'exit 130' INT TERM

REDIS_PORT=$(bench_free_port)
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no >"$out/redis.log" 2>&1 &
REDIS_PID=$!
pids+=("$REDIS_PID")
MEMCACHED_PORT=$(bench_free_port)
mc_user=(); [[ $(id -u) == 0 ]] && mc_user=(-u memcache)
memcached "${mc_user[@]}" -l 127.0.0.1 -p "$MEMCACHED_PORT" -m 512 -t 1 >"$out/memcached.log" 2>&1 &
MEMCACHED_PID=$!
pids+=("$MEMCACHED_PID")
_bench_wait_port "$REDIS_PID" "$REDIS_PORT" 30 || { echo "redis-server did not start" >&2; exit 1; }
_bench_wait_port "$MEMCACHED_PID" "$MEMCACHED_PORT" 30 || { echo "memcached did not start" >&2; exit 1; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "redis-server: $(redis-server --version)"
    echo "memcached: $(memcached -V)"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/kv_bench.py --outdir "$out" --loadcell "$out/loadcell" \
    --redis-port "$REDIS_PORT" --redis-pid "$REDIS_PID" \
    --memcached-port "$MEMCACHED_PORT" --memcached-pid "$MEMCACHED_PID" \
    --time "${BENCH_TIME:-10}" --reps "${BENCH_REPS:-3}" --requests "${BENCH_REQUESTS:-1000000}"
echo "results: $out" >&2
