#!/usr/bin/env bash
# loadcell ts-ingest vs influxdata's inch, side by side on one private
# InfluxDB 1.6 (see docs/BENCHMARKS.md, "Time series (issue 18)"): the same
# series, points, batch size and workers, the database dropped before every
# run, tools alternating.
#
#   cargo build --release -p loadcell && \
#   cargo build --release -p loadcell-testkit --example ts_server && bench/ts.sh
#
# Environment (defaults in brackets):
#   BENCH_TAGS inch's -t, tag cardinalities [100,100: 10,000 series]
#   BENCH_POINTS per series [500]  BENCH_BATCHES [500,5000]
#   BENCH_WORKERS [1,2,4]  BENCH_REPS [3]
#   LOADCELL  binary to test [target/release/loadcell]
#   INCH      inch [~/.cache/loadcell-bench/bin/inch: built by hand from
#             github.com/influxdata/inch, the Go module proxy refusing it]
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=${LOADCELL:-target/release/loadcell}
INCH=${INCH:-$HOME/.cache/loadcell-bench/bin/inch}
SERVER=target/release/examples/ts_server
for bin in "$LOADCELL" "$SERVER" "$INCH"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-ts
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it
cp "$INCH" "$out/inch"

# The server stops when its input closes: when this script exits.
coproc TS { exec "$SERVER" influxdb; }
read -r URL SERVER_PID _ <&"${TS[0]}" || { echo "InfluxDB did not start" >&2; exit 1; }
echo "InfluxDB $URL (pid $SERVER_PID)" >&2

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "server: $(curl -sI "$URL/ping" | grep -i '^X-Influxdb-Version' | tr -d '\r')"
    echo "inch: sha256 $(sha256sum "$out/inch" | cut -c1-16), built with $(go version "$out/inch" 2>/dev/null | awk '{print $2}')"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/ts_bench.py --outdir "$out" --loadcell "$out/loadcell" --inch "$out/inch" \
    --url "$URL" --server-pid "$SERVER_PID" --tags "${BENCH_TAGS:-100,100}" \
    --points "${BENCH_POINTS:-500}" --batches "${BENCH_BATCHES:-500,5000}" \
    --workers "${BENCH_WORKERS:-1,2,4}" --reps "${BENCH_REPS:-3}"
echo "results: $out" >&2
