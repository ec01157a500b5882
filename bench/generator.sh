#!/usr/bin/env bash
# The generator's own overhead: loadcell against the in-process `sim://`
# server at zero latency (no lock, no clock read, no wait in the driver), so
# everything measured is loadcell's own work per operation: claiming the
# event, the kv workload's key and value, timing and recording every reply
# into HDR histograms. One worker thread (one core), closed loop.
#
#   cargo build --release && bench/generator.sh
#
# Environment (defaults in brackets):
#   BENCH_TIME      seconds per run                          [10]
#   BENCH_REPS      runs per configuration (the best is kept) [3]
#   BENCH_CLIENTS   sessions on the one worker thread         [8]
#   BENCH_PIPELINES space-separated --pipeline depths        ["1 16"]
#   BENCH_TARGET    the target                                [sim://]
#   LOADCELL        binary to test                            [target/release/loadcell]
#
# For each configuration: ops/s on the one worker thread, and CPU time per
# operation from the result's summary.client_cpu (user + system, the whole
# process, measurement phase only) divided by summary.ops. Results go to
# bench/results/<UTC time>-generator/ (one JSON result per run, table.md,
# host.txt); the Markdown table is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=${LOADCELL:-target/release/loadcell}
TIME=${BENCH_TIME:-10}
REPS=${BENCH_REPS:-3}
CLIENTS=${BENCH_CLIENTS:-8}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
TARGET=${BENCH_TARGET:-sim://}

if [[ ! -x $LOADCELL ]]; then
    echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2
    exit 1
fi
command -v python3 >/dev/null || { echo "python3 is needed to read the results" >&2; exit 1; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$PWD/bench/results/$stamp-generator
mkdir -p "$out"
# Copy the binary so a rebuild by someone else mid-benchmark cannot swap it.
cp "$LOADCELL" "$out/loadcell"
LOADCELL=$out/loadcell

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|^CPU\(s\)|MHz|Thread|Core' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "loadcell: sha256 $(sha256sum "$LOADCELL" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

for depth in $PIPELINES; do
    for rep in $(seq 1 "$REPS"); do
        cmd=("$LOADCELL" run kv --target "$TARGET" --ratio 0:1 --threads 1 --clients "$CLIENTS"
            --pipeline "$depth" --time "${TIME}s" --out "$out/p$depth-$rep.json")
        echo "+ ${cmd[*]}" >&2
        (cd "$out" && "${cmd[@]}" >/dev/null)
    done
done

python3 - "$out" "$CLIENTS" "$PIPELINES" "$REPS" <<'EOF' | tee "$out/table.md"
import json, sys
out, clients, pipelines, reps = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
print(f"| --pipeline | sessions | ops/s (1 thread) | CPU ns/op | of which user | events/s | best of |")
print(f"|---:|---:|---:|---:|---:|---:|---:|")
for depth in pipelines:
    runs = []
    for rep in range(1, reps + 1):
        r = json.load(open(f"{out}/p{depth}-{rep}.json"))
        s = r["summary"]
        cpu = s["client_cpu"]
        runs.append((s["ops_per_sec"], 1e9 * (cpu["user_s"] + cpu["sys_s"]) / s["ops"],
                     1e9 * cpu["user_s"] / s["ops"], s["events_per_sec"]))
    best = max(runs)
    print(f"| {depth} | {clients} | {best[0]:,.0f} | {best[1]:.0f} | {best[2]:.0f} | {best[3]:,.0f} | {reps} |")
EOF
echo "results: $out" >&2
