#!/usr/bin/env bash
# Machine baselines vs their peers, side by side (see docs/BENCHMARKS.md):
# `loadcell run cpu` vs `sysbench cpu` (1 and 2 threads, events/s), and
# `loadcell run disk-randread` vs plain fio with the same profile (IOPS).
#
#   cargo build --release && bench/machine.sh
#
# Environment (defaults in brackets):
#   BENCH_CPU_TIME   seconds per cpu run [5]     BENCH_REPS  runs of each [3]
#   BENCH_DISK_TIME  seconds per disk run [5]    BENCH_DISK_SIZE  file size [64m]
#   BENCH_DIR        directory for the disk file [a new one under bench/results]
#   LOADCELL         binary to test [target/release/loadcell]
#
# The runs alternate (sysbench, loadcell, sysbench, ...) so that a busy
# neighbour slows both alike. The disk file is small: this box's disk is shared.
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=${LOADCELL:-target/release/loadcell}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2; exit 1; }
for bin in sysbench fio; do
    command -v $bin >/dev/null || { echo "$bin not installed (scripts/install-test-deps.sh)" >&2; exit 1; }
done
CPU_TIME=${BENCH_CPU_TIME:-5}
DISK_TIME=${BENCH_DISK_TIME:-5}
DISK_SIZE=${BENCH_DISK_SIZE:-64m}
REPS=${BENCH_REPS:-3}

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-machine
mkdir -p "$out"
dir=${BENCH_DIR:-$out/disk}
mkdir -p "$dir"
fio_file=$dir/bench-fio.tmp
trap 'rm -f "$fio_file"' EXIT
trap 'exit 130' INT TERM

echo "tool threads run events_per_sec" >"$out/cpu.txt"
for threads in 1 2; do
    for rep in $(seq "$REPS"); do
        sb=$(sysbench cpu --threads="$threads" --time="$CPU_TIME" run | awk '/events per second/ {print $4}')
        echo "sysbench $threads $rep $sb" | tee -a "$out/cpu.txt"
        "$LOADCELL" run cpu --threads "$threads" --time "${CPU_TIME}s" --out "$out/cpu-$threads-$rep.json" >/dev/null 2>&1
        lc=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["summary"]["events_per_sec"], 2))' "$out/cpu-$threads-$rep.json")
        echo "loadcell $threads $rep $lc" | tee -a "$out/cpu.txt"
    done
done

# The same job for both: disk-randread's profile on a small file.
fio_job=(--name=bench --filename="$fio_file" --rw=randread --bs=4096 --iodepth=128 --numjobs=1
    --size="$DISK_SIZE" --direct=1 --ioengine=libaio --time_based --runtime="${DISK_TIME}s"
    --group_reporting --output-format=json)
echo "tool run iops p99_ms" >"$out/disk.txt"
for rep in $(seq "$REPS"); do
    fio "${fio_job[@]}" >"$out/fio-$rep.json"
    rm -f "$fio_file"
    python3 - "$out/fio-$rep.json" "$rep" <<'PY' | tee -a "$out/disk.txt"
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print("fio", sys.argv[2], round(r["iops"]), round(r["clat_ns"]["percentile"]["99.000000"] / 1e6, 3))
PY
    "$LOADCELL" run disk-randread --directory "$dir" --size "$DISK_SIZE" --time "${DISK_TIME}s" \
        --out "$out/disk-$rep.json" >/dev/null 2>&1
    python3 - "$out/disk-$rep.json" "$rep" <<'PY' | tee -a "$out/disk.txt"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print("loadcell", sys.argv[2], round(s["ops_per_sec"]), s["latency_ms"]["p99"])
PY
done
echo "results in $out"
