#!/usr/bin/env bash
# Kafka: loadcell's `stream` workload (`--mode produce`, then `--mode consume`
# draining what it produced) against Kafka's own ProducerPerformance and
# ConsumerPerformance (the same jars as the broker), alternating round by
# round on one private Kafka 3.9.2 KRaft broker, fresh topics, 220-byte
# records, the same acks, linger.ms and batch.size for both producers (see
# docs/BENCHMARKS.md, "Change streams (issue 19)").
#
#   cargo build --release -p loadcell && \
#   cargo build -p loadcell-testkit --example stream_server && bench/stream.sh
#
# (stream_server only starts and stops the broker: its build does not matter.)
#
# Environment (defaults in brackets):
#   BENCH_ROWS per run [1000000]  BENCH_PARTITIONS [1,8]  BENCH_REPS [3]
#   BENCH_BATCH loadcell's rows per produce request [10000]
#   BENCH_PRODUCERS loadcell's producer sessions [1]
#   BENCH_CONSUMERS loadcell's consumer sessions [1]
#   BENCH_CONSUME_TIME how long loadcell's consume run lasts [20s]
#   BENCH_FIXED_ROWS rows of each tool's fixed-cost run [1000]
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=target/release/loadcell
SERVER=target/debug/examples/stream_server
for bin in "$LOADCELL" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-stream
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

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
    --loadcell "$out/loadcell" --log4j "$PWD/crates/testkit/src/kafka-log4j.properties" \
    --rows "${BENCH_ROWS:-1000000}" --partitions "${BENCH_PARTITIONS:-1,8}" \
    --batch "${BENCH_BATCH:-10000}" --producers "${BENCH_PRODUCERS:-1}" --consumers "${BENCH_CONSUMERS:-1}" \
    --consume-time "${BENCH_CONSUME_TIME:-20s}" --fixed-rows "${BENCH_FIXED_ROWS:-1000}" \
    --reps "${BENCH_REPS:-3}"
echo "results: $out" >&2
