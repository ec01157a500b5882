#!/usr/bin/env bash
# The cost of --export (issue 22): the same run without export, with
# --export prometheus-rw=… and with --export influxdb=…, against a real
# Prometheus (remote-write receiver) and InfluxDB 1.6 started as the tests
# start them, in alternating rounds (the order rotates each round). The
# load is loadcell's own kv workload on the in-process sim:// server, so
# every CPU second measured is loadcell's: client CPU per event is the
# process's rusage (bench/measure.py) over the result's events, and the
# export thread's own CPU (loadcell-export, read from /proc while it runs),
# which the noise of a busy machine does not blur. Each exported run must
# show its intervals written, none failed or dropped.
# See docs/BENCHMARKS.md, "The cost of --export".
#
#   cargo build --release -p loadcell && \
#   cargo build -p loadcell-testkit --example ts_server && bench/export.sh
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS [5]  BENCH_TIME seconds per run [10]
#   BENCH_RATE events/s, open loop [20000]  BENCH_INTERVAL --report-interval [1s]
#   LOADCELL [target/release/loadcell]  TS_SERVER [target/debug/examples/ts_server]
set -euo pipefail
cd "$(dirname "$0")/.."
LOADCELL=${LOADCELL:-target/release/loadcell}
TS_SERVER=${TS_SERVER:-target/debug/examples/ts_server}
ROUNDS=${BENCH_ROUNDS:-5}
TIME=${BENCH_TIME:-10}
RATE=${BENCH_RATE:-20000}
INTERVAL=${BENCH_INTERVAL:-1s}
for bin in "$LOADCELL" "$TS_SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done
out=$PWD/bench/results/export-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

# Each server stops when its input closes: when this script exits.
coproc PROM { exec "$TS_SERVER" prometheus; }
read -r PROM_URL _ <&"${PROM[0]}" || { echo "Prometheus did not start" >&2; exit 1; }
coproc INFLUX { exec "$TS_SERVER" influxdb; }
read -r INFLUX_URL _ <&"${INFLUX[0]}" || { echo "InfluxDB did not start" >&2; exit 1; }
curl -sf -XPOST "$INFLUX_URL/query" --data-urlencode "q=CREATE DATABASE loadcell" >/dev/null
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    echo "uptime at start: $(uptime)"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD)"
    echo "prometheus: $PROM_URL  influxdb: $INFLUX_URL"
} >"$out/host.txt"
cat "$out/host.txt" >&2

common=(run kv --target sim:// --ratio 1:10 --threads 1 --clients 8 --rate "$RATE"
    --time "${TIME}s" --report-interval "$INTERVAL" --json)
modes=(none prometheus influxdb)
for round in $(seq 1 "$ROUNDS"); do
    for k in 0 1 2; do
        mode=${modes[$(( (round + k) % 3 ))]}
        case $mode in
            none) extra=() ;;
            prometheus) extra=(--export "prometheus-rw=$PROM_URL/api/v1/write") ;;
            influxdb) extra=(--export "influxdb=$INFLUX_URL/loadcell") ;;
        esac
        echo "round $round: $mode (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        cut -d' ' -f1-3 /proc/loadavg >"$out/$round-$mode.load"
        python3 bench/measure.py --threads -- "$out/loadcell" "${common[@]}" "${extra[@]}" >"$out/$round-$mode.json"
    done
done
echo "uptime at end: $(uptime)" >>"$out/host.txt"
python3 - "$out" <<'PY' | tee "$out/table.md"
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("*-*.json")):
    m = json.loads(f.read_text())
    r = json.loads(m["stdout"])
    mode = f.stem.split("-", 1)[1]
    events = r["summary"]["events"]
    for e in r.get("exports", []):
        assert e["failed_writes"] == 0 and e["dropped_intervals"] == 0 and e["intervals"] >= 1, (f, e)
    load = float(f.with_suffix(".load").read_text().split()[0])
    export_ms = m["thread_cpu_s"].get("loadcell-export", 0.0) * 1e3
    collector_ms = m["thread_cpu_s"].get("loadcell", 0.0) * 1e3
    rows.setdefault(mode, []).append((m["cpu_s"] / events * 1e6, r["summary"]["events_per_sec"],
                                      sum(e["intervals"] for e in r.get("exports", [])), load,
                                      export_ms, m["cpu_s"], collector_ms))
base = statistics.median(c for c, *_ in rows["none"])
print("| export | runs | client CPU µs/event, median (range) | vs none | events/s (median) | intervals exported per run | export thread CPU ms per run, median (max) | of the process's CPU | main thread (collector) CPU ms per run, median | load avg (range) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for mode in ["none", "prometheus", "influxdb"]:
    v = rows[mode]
    cpu = [c for c, *_ in v]
    med = statistics.median(cpu)
    exp = [x[4] for x in v]
    share = statistics.median(x[4] / 1e3 / x[5] for x in v) * 100
    print(f"| {mode} | {len(v)} | {med:.2f} ({min(cpu):.2f}–{max(cpu):.2f}) | {100 * (med / base - 1):+.1f}% "
          f"| {statistics.median(x[1] for x in v):.0f} | {min(x[2] for x in v)} "
          f"| {statistics.median(exp):.1f} ({max(exp):.1f}) | {share:.2f}% "
          f"| {statistics.median(x[6] for x in v):.0f} "
          f"| {min(x[3] for x in v):.1f}–{max(x[3] for x in v):.1f} |")
for mode, v in sorted(rows.items()):
    print(mode, "per run:", ", ".join(f"{c:.2f}µs" for c, *_ in v))
PY
echo "results: $out" >&2
