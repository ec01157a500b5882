#!/usr/bin/env bash
# sysbench vs loadcell, side by side on the same private servers (see docs/BENCHMARKS.md).
#
#   cargo build --release && bench/sql.sh
#
# Environment (defaults in brackets):
#   BENCH_SERVERS   servers to run            ["mariadb postgres"]
#   BENCH_WORKLOADS comma-separated workloads ["oltp_read_write,oltp_point_select"]
#   BENCH_TIME      seconds per measured run  [30]
#   BENCH_REPS      measured runs per tool    [3]   (alternating: S L, L S, S L, ...)
#   BENCH_WARMUP    seconds of unrecorded warm-up per tool and workload [5]
#   BENCH_THREADS   [8]   BENCH_TABLES [4]   BENCH_TABLE_SIZE [100000]
#   BENCH_TOOLS     ["sysbench,loadcell"]     ("sysbench" alone tests the harness;
#                   "loadcell-perthread": one worker thread per session, as sysbench)
#   LOADCELL        binary to test            [target/release/loadcell]
#
# Results go to bench/results/<UTC time>/ (runs.jsonl, runs.csv, summary.json,
# summary.csv, table.md, raw/ outputs, host.txt); the Markdown table is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVERS=${BENCH_SERVERS:-"mariadb postgres"}
TOOLS=${BENCH_TOOLS:-sysbench,loadcell}
LOADCELL=${LOADCELL:-target/release/loadcell}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=bench/results/$stamp
mkdir -p "$out"

# shellcheck source=bench/servers.sh
source bench/servers.sh
trap bench_stop_all EXIT
trap 'exit 130' INT TERM

if [[ $TOOLS == *loadcell* ]]; then
    if [[ ! -x $LOADCELL ]]; then
        echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2
        exit 1
    fi
    # Copy the binary so a rebuild by someone else mid-benchmark cannot swap it.
    cp "$LOADCELL" "$out/loadcell"
    LOADCELL=$out/loadcell
fi
command -v sysbench >/dev/null || { echo "sysbench not installed (apt-get install sysbench)" >&2; exit 1; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | head -20
    echo "kernel: $(uname -srm)"
    echo "memory: $(free -g | awk '/Mem:/{print $2" GiB"}')"
    echo "uptime: $(uptime)"
    echo "sysbench: $(sysbench --version)"
    [[ -x ${LOADCELL} ]] && echo "loadcell: $($LOADCELL --version 2>/dev/null || true) sha256 $(sha256sum "$LOADCELL" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

common=(--outdir "$out" --loadcell "$LOADCELL" --tools "$TOOLS"
    --workloads "${BENCH_WORKLOADS:-oltp_read_write,oltp_point_select}"
    --time "${BENCH_TIME:-30}" --reps "${BENCH_REPS:-3}" --warmup "${BENCH_WARMUP:-5}"
    --threads "${BENCH_THREADS:-8}" --tables "${BENCH_TABLES:-4}" --table-size "${BENCH_TABLE_SIZE:-100000}")

for s in $SERVERS; do
    case $s in
    mariadb)
        mariadb_start
        python3 bench/sql_bench.py run --server mariadb --port "$MARIADB_PORT" --server-pid "$MARIADB_PID" \
            --server-version "MariaDB $(mariadb_sql 'SELECT VERSION()')" "${common[@]}"
        mariadb_stop
        ;;
    postgres)
        postgres_start
        python3 bench/sql_bench.py run --server postgres --port "$POSTGRES_PORT" --server-pid "$POSTGRES_PID" \
            --server-version "PostgreSQL $(postgres_sql 'SHOW server_version')" "${common[@]}"
        postgres_stop
        ;;
    *) echo "unknown server $s" >&2; exit 2 ;;
    esac
done

python3 bench/sql_bench.py report "$out"
echo >&2
echo "results: $out" >&2
