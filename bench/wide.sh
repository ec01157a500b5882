#!/usr/bin/env bash
# Wide-column: loadcell's HBase PE tests against latte on one Cassandra 4.1.10
# (over CQL), and against HBase's own PerformanceEvaluation on one HBase 2.5.8
# (loadcell through the Thrift2 gateway, PE over HBase's native RPC),
# alternating round by round (see docs/BENCHMARKS.md, "Wide-column (issue 20)").
#
#   cargo build --release -p loadcell && \
#   cargo build --release -p loadcell-testkit --example wide_server && \
#   cargo install latte-cli && \
#   for jar in hbase-mapreduce hbase-server; do \
#       mvn -q dependency:copy -Dartifact=org.apache.hbase:$jar:2.5.8:jar:tests \
#           -DoutputDirectory=bench/results; done && \
#   bench/wide.sh
#
# PE is in hbase-mapreduce's tests jar; its randomRead needs
# FilterAllFilter from hbase-server's.
#
# Environment (defaults in brackets):
#   BENCH_SYSTEMS [cassandra,hbase]  BENCH_ROWS per client [2000]
#   BENCH_CLIENTS [16]  BENCH_VALUE_SIZE [1000]  BENCH_REPS [3]
#   BENCH_WARMUP rounds not counted [2]
#   BENCH_FIXED_ROWS rows per client of each tool's fixed-cost run [10]
#   BENCH_TESTS [randomWrite,randomRead]
#   LATTE [latte]
#   PE_JARS [bench/results/hbase-mapreduce-2.5.8-tests.jar:bench/results/hbase-server-2.5.8-tests.jar]
#   HBASE_LIB [/var/tmp/loadcell-testkit/hbase-2.5.8/lib: the testkit's jars]
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=target/release/loadcell
SERVER=target/release/examples/wide_server
for bin in "$LOADCELL" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-wide
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "java: $(java -version 2>&1 | head -1)"
    echo "latte: $(${LATTE:-latte} --version 2>&1 | head -1)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

common=(--loadcell "$out/loadcell" --rows "${BENCH_ROWS:-2000}" --clients "${BENCH_CLIENTS:-16}"
        --value-size "${BENCH_VALUE_SIZE:-1000}" --reps "${BENCH_REPS:-3}" --warmup "${BENCH_WARMUP:-2}"
        --fixed-rows "${BENCH_FIXED_ROWS:-10}"
        --tests "${BENCH_TESTS:-randomWrite,randomRead}")

systems=${BENCH_SYSTEMS:-cassandra,hbase}
for system in ${systems//,/ }; do
    mkdir -p "$out/$system"
    # The server stops when its input closes: when this block ends.
    coproc WIDE { exec "$SERVER" "$system"; }
    if [[ $system == cassandra ]]; then
        read -r ADDRESS PID <&"${WIDE[0]}" || { echo "Cassandra did not start" >&2; exit 1; }
        python3 bench/wide_bench.py --outdir "$out/$system" --system cassandra \
            --address "$ADDRESS" --latte "${LATTE:-latte}" "${common[@]}"
    else
        read -r URL MASTER_PID THRIFT_PID CONF INFO_PORT <&"${WIDE[0]}" \
            || { echo "HBase did not start" >&2; exit 1; }
        python3 bench/wide_bench.py --outdir "$out/$system" --system hbase \
            --thrift-url "$URL" --thrift-pid "$THRIFT_PID" --conf "$CONF" \
            --hbase-lib "${HBASE_LIB:-/var/tmp/loadcell-testkit/hbase-2.5.8/lib}" \
            --pe-jars "${PE_JARS:-bench/results/hbase-mapreduce-2.5.8-tests.jar:bench/results/hbase-server-2.5.8-tests.jar}" \
            "${common[@]}"
    fi
    exec {WIDE[1]}>&-
    wait "$WIDE_PID" || true
done
echo "results: $out" >&2
