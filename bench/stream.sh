#!/usr/bin/env bash
# Kafka: loadcell's Kafka driver and `stream` workload against Kafka's own
# ProducerPerformance and ConsumerPerformance (the same jars as the broker),
# alternating on one private Kafka 3.9.2 KRaft broker, fresh topics, 220-byte
# records, acks=all (see docs/BENCHMARKS.md, "Change streams (issue 19)").
#
#   cargo build --release -p loadcell && \
#   cargo build --release -p loadcell-drivers --example kafka_rows && \
#   cargo build --release -p loadcell-testkit --example stream_server && bench/stream.sh
#
# Environment (defaults in brackets):
#   BENCH_ROWS per run [2000000]  BENCH_PARTITIONS [1,8]  BENCH_REPS [3]
#   BENCH_BATCH kafka_rows' rows per produce call [5000]
#   LOADCELL_CMD loadcell's run of the `stream` workload, with {url} {topic}
#             {rows} {partitions} {out} filled in; empty [default] leaves the
#             workload out, e.g.
#             "target/release/loadcell run stream --target {url} --stream {topic}
#              --partitions {partitions} --rows {rows} --out {out}"
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS_BIN=target/release/examples/kafka_rows
SERVER=target/release/examples/stream_server
for bin in "$ROWS_BIN" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-stream
mkdir -p "$out"
cp "$ROWS_BIN" "$out/kafka_rows" # a rebuild mid-benchmark cannot swap it

# The broker stops when its input closes: when this script exits.
coproc KAFKA { exec "$SERVER" kafka; }
read -r URL SERVER_PID LIB <&"${KAFKA[0]}" || { echo "Kafka did not start" >&2; exit 1; }
echo "Kafka $URL (pid $SERVER_PID, jars $LIB)" >&2

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "java: $(java -version 2>&1 | head -1)"
    echo "kafka: $(ls "$LIB" | grep -E '^kafka_2.13-.*\.jar$')"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/stream_bench.py --outdir "$out" --url "$URL" --lib "$LIB" \
    --kafka-rows "$out/kafka_rows" --log4j "$PWD/crates/testkit/src/kafka-log4j.properties" \
    --loadcell-cmd "${LOADCELL_CMD:-}" --rows "${BENCH_ROWS:-2000000}" \
    --partitions "${BENCH_PARTITIONS:-1,8}" --batch "${BENCH_BATCH:-5000}" \
    --reps "${BENCH_REPS:-3}"
echo "results: $out" >&2
