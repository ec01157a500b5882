#!/usr/bin/env bash
# MQTT: loadcell's `mqtt-pubsub` publishers against mqtt-benchmark's
# (github.com/krylovsk/mqtt-benchmark v0.2.0, Go, paho.mqtt.golang), the
# same clients, messages, payload and QoS, closed loop, one message in
# flight per client, alternating round by round on one private Mosquitto
# (see docs/BENCHMARKS.md, "MQTT (issue 41)").
#
#   cargo build --release -p loadcell && \
#   cargo build -p loadcell-testkit --example mqtt_server && \
#   MQTT_BENCHMARK=/path/to/mqtt-benchmark bench/mqtt.sh
#
# mqtt-benchmark is built by hand (no registry has it): see
# docs/BENCHMARKS.md for the steps. Environment (defaults in brackets):
#   BENCH_CLIENTS [50]  BENCH_MESSAGES per client [4000]  BENCH_QOS [0,1]
#   BENCH_REPS [3]  BENCH_SIZE payload bytes [256]
# A connection storm: BENCH_MESSAGES=1 (and e.g. BENCH_CLIENTS=2000
# BENCH_QOS=1): connects/s, CPU and memory per connection, the fixed cost
# read from a run of BENCH_BASELINE [10] clients.
set -euo pipefail
# Every client is a socket, in the tools and in the broker.
ulimit -n "$(ulimit -Hn)"
cd "$(dirname "$0")/.."

LOADCELL=target/release/loadcell
SERVER=target/debug/examples/mqtt_server
PEER=${MQTT_BENCHMARK:-mqtt-benchmark}
for bin in "$LOADCELL" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done
command -v "$PEER" >/dev/null || { echo "no mqtt-benchmark: set MQTT_BENCHMARK (see the top of $0)" >&2; exit 1; }

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-mqtt
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

# The broker stops when its input closes: when this script exits.
coproc BROKER { exec "$SERVER"; }
read -r URL SERVER_PID <&"${BROKER[0]}" || { echo "Mosquitto did not start" >&2; exit 1; }
echo "Mosquitto $URL (pid $SERVER_PID)" >&2

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "mosquitto: $(/usr/sbin/mosquitto -h 2>&1 | head -1)"
    echo "peer: $("$PEER" -h 2>&1 | head -1) ($(command -v "$PEER"))"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

python3 bench/mqtt_bench.py --outdir "$out" --url "$URL" --server-pid "$SERVER_PID" \
    --loadcell "$out/loadcell" --peer "$(command -v "$PEER")" \
    --clients "${BENCH_CLIENTS:-50}" --messages "${BENCH_MESSAGES:-4000}" \
    --qos "${BENCH_QOS:-0,1}" --size "${BENCH_SIZE:-256}" --reps "${BENCH_REPS:-3}" \
    --baseline-clients "${BENCH_BASELINE:-10}"
echo "results: $out" >&2
