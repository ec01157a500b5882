#!/usr/bin/env bash
# HTTP peers vs loadcell, side by side on one private nginx (see
# docs/BENCHMARKS.md, "HTTP (issue 16)"): wrk and oha on keep-alive GETs,
# k6 (constant-arrival-rate) and vegeta at a fixed rate, a 200 ms nginx
# stall under a fixed rate, and hyper's HTTP/1.1 client against loadcell's.
#
#   cargo build --release -p loadcell && \
#   cargo build --release -p loadcell-drivers --example http1_clients && bench/http.sh
#
# Environment (defaults in brackets):
#   BENCH_TIME  seconds per run [10]   BENCH_REPS [3]   BENCH_RATES [20000 5000]
#   LOADCELL    binary to test [target/release/loadcell]
#   OHA K6 VEGETA  peers [~/.cargo/bin/oha, ~/go/bin/k6, ~/go/bin/vegeta]
#
# nginx: bench/servers.sh's nginx_start (one worker, access log off, a
# 612-byte /index.html as testkit's).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/release/loadcell}
CLIENTS=target/release/examples/http1_clients
OHA=${OHA:-$HOME/.cargo/bin/oha}
K6=${K6:-$HOME/go/bin/k6}
VEGETA=${VEGETA:-$HOME/go/bin/vegeta}
for bin in "$LOADCELL" "$CLIENTS"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
for bin in "$NGINX" wrk "$OHA" "$K6" "$VEGETA"; do
    [[ -x $bin ]] || command -v "$bin" >/dev/null || { echo "$bin not installed" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-http
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it
cp "$CLIENTS" "$out/http1_clients"

trap bench_stop_all EXIT
trap 'exit 130' INT TERM
nginx_start "$out/nginx"
PORT=$NGINX_PORT

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "nginx: $("$NGINX" -v 2>&1)"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "oha: $("$OHA" --version)"
    echo "k6: $("$K6" version | head -1)"
    echo "vegeta: $("$VEGETA" -version 2>&1 | head -1)"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/http_bench.py --outdir "$out" --loadcell "$out/loadcell" \
    --clients "$out/http1_clients" --oha "$OHA" --k6 "$K6" --vegeta "$VEGETA" \
    --port "$PORT" --nginx-pid "$NGINX_PID" --time "${BENCH_TIME:-10}" \
    --reps "${BENCH_REPS:-3}" --rates ${BENCH_RATES:-20000 5000}
echo "results: $out" >&2
