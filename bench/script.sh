#!/usr/bin/env bash
# The built-in oltp_point_select against the same workload written as a file
# (bench/script_point_select.toml), on one private MariaDB, in alternating
# rounds (B S, S B, …): events/s and client CPU per event of each run, then
# the medians (see docs/BENCHMARKS.md, "Your own workload against its built-in twin").
#
#   bench/script.sh
#
# Environment: BENCH_ROUNDS [5]  BENCH_TIME seconds per run [10]
#              BENCH_THREADS [4] LOADCELL [target/debug/loadcell; measure a release build:
#              cargo build --release -p loadcell && LOADCELL=target/release/loadcell bench/script.sh]
set -euo pipefail
cd "$(dirname "$0")/.."
LOADCELL=${LOADCELL:-target/debug/loadcell}
ROUNDS=${BENCH_ROUNDS:-5}
TIME=${BENCH_TIME:-10}
THREADS=${BENCH_THREADS:-4}
out=bench/results/script-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
sha256sum "$LOADCELL" >"$out/loadcell.sha256"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it
LOADCELL=$out/loadcell

# shellcheck source=bench/servers.sh
source bench/servers.sh
trap bench_stop_all EXIT
trap 'exit 130' INT TERM
mariadb_start
"$LOADCELL" prepare oltp_point_select --target "$MARIADB_URL" --tables 1 --table-size 100000

builtin=(run oltp_point_select --tables 1 --table-size 100000)
file=(run script --file bench/script_point_select.toml)
common=(--target "$MARIADB_URL" --threads "$THREADS" --time "${TIME}s" --json)
for round in $(seq 1 "$ROUNDS"); do
    if (( round % 2 )); then order="builtin script"; else order="script builtin"; fi
    for tool in $order; do
        if [[ $tool == builtin ]]; then args=("${builtin[@]}"); else args=("${file[@]}"); fi
        cut -d' ' -f1 /proc/loadavg >"$out/$round-$tool.load"
        python3 bench/measure.py -- "$LOADCELL" "${args[@]}" "${common[@]}" >"$out/$round-$tool.json"
    done
done
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("*-*.json")):
    m = json.loads(f.read_text())
    r = json.loads(m["stdout"])
    events = r["summary"]["events"]
    tool = f.stem.split("-", 1)[1]
    load = float(f.with_suffix(".load").read_text())
    rows.setdefault(tool, []).append((r["summary"]["events_per_sec"], m["cpu_s"] / events * 1e6, load))
print("| workload | runs | events/s (median) | client CPU µs/event, median (range) | load avg (range) |")
print("|---|---|---|---|---|")
for tool, v in sorted(rows.items()):
    cpu = [c for _, c, _ in v]
    print(f"| {tool} | {len(v)} | {statistics.median(x for x, _, _ in v):.0f} "
          f"| {statistics.median(cpu):.2f} ({min(cpu):.2f}–{max(cpu):.2f}) "
          f"| {min(l for *_, l in v):.1f}–{max(l for *_, l in v):.1f} |")
for tool, v in sorted(rows.items()):
    print(tool, "per run:", ", ".join(f"{e:.0f}/s {c:.2f}µs" for e, c, _ in v))
PY
