#!/usr/bin/env bash
# ts-ingest's line protocol over HTTP (influx://) vs over TCP (influx+tcp://)
# on the same server, alternating round by round (see docs/BENCHMARKS.md,
# "Time series over TCP"). A fresh measurement per run; QuestDB's tables
# are prepared before and dropped after each.
#
#   cargo build -p loadcell && cargo build -p loadcell-testkit --example ts_server && \
#   bench/ts_tcp.sh questdb
#
# Environment (defaults in brackets):
#   BENCH_SERIES [10000]  BENCH_POINTS per series [100]  BENCH_BATCH [5000]
#   BENCH_THREADS [2]  BENCH_REPS rounds [3]
#   LOADCELL [target/debug/loadcell]  SERVER [target/debug/examples/ts_server]
set -euo pipefail
cd "$(dirname "$0")/.."

PRODUCT=${1:-questdb}
LOADCELL=${LOADCELL:-target/debug/loadcell}
SERVER=${SERVER:-target/debug/examples/ts_server}
SERIES=${BENCH_SERIES:-10000}
POINTS=${BENCH_POINTS:-100}
BATCH=${BENCH_BATCH:-5000}
THREADS=${BENCH_THREADS:-2}
REPS=${BENCH_REPS:-3}
for bin in "$LOADCELL" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-ts-tcp-$PRODUCT
mkdir -p "$out"

# The server stops when its input closes: when this script exits.
coproc TS { exec "$SERVER" "$PRODUCT"; }
read -r URL SERVER_PID _ INFLUX_TCP _ <&"${TS[0]}" || { echo "$PRODUCT did not start" >&2; exit 1; }
[[ $INFLUX_TCP != - ]] || { echo "$PRODUCT takes no line protocol over TCP" >&2; exit 1; }
HOSTPORT=${URL#http://}
echo "$PRODUCT $URL, line protocol over TCP on $INFLUX_TCP (pid $SERVER_PID)" >&2
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    echo "uptime: $(uptime)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit')"
} >"$out/host.txt"

# POINTS points 10 s apart, ending on a multiple of 10 s an hour ago.
end=$(( ($(date +%s) - 3600) / 10 * 10 ))
start=$(( end - POINTS * 10 ))
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

run() { # transport round
    local m="m_$1_$2" target
    case $1 in
        # VictoriaMetrics labels series with the database written to; TCP writes none.
        http) target="influx://$HOSTPORT/bench" ;;
        tcp) target="influx+tcp://127.0.0.1:$INFLUX_TCP?query=$URL" ;;
    esac
    local common=(--target "$target" --measurement "$m")
    [[ $PRODUCT != questdb ]] || "$LOADCELL" prepare ts-ingest "${common[@]}" 2>/dev/null
    "$LOADCELL" run ts-ingest "${common[@]}" --tags 2 --fields 1 --series "$SERIES" \
        --points-per-request "$BATCH" --threads "$THREADS" \
        --start "$(iso $start)" --end "$(iso $end)" --json >"$out/$m.json" 2>"$out/$m.log"
    [[ $PRODUCT != questdb ]] || "$LOADCELL" cleanup ts-ingest "${common[@]}" 2>/dev/null
    python3 - "$out/$m.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
v = r["verification"]
print(f'{sys.argv[2]} {r["summary"]["items_per_sec"]:.0f} points/s, verified {v["ok"]} ({v["found"]}/{v["expected"]} series)')
EOF
}

for round in $(seq 1 "$REPS"); do
    if (( round % 2 )); then order=(http tcp); else order=(tcp http); fi
    for transport in "${order[@]}"; do
        run "$transport" "$round" | tee -a "$out/runs.txt"
    done
done
python3 - "$out/runs.txt" <<'EOF'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    transport, rate = line.split()[:2]
    rates.setdefault(transport, []).append(float(rate))
for transport, r in sorted(rates.items()):
    print(f"{transport}: median {statistics.median(r):,.0f} points/s of {len(r)} runs {sorted(round(x) for x in r)}")
EOF
echo "results: $out" >&2
