#!/usr/bin/env bash
# loadcell vs esrally's fork OpenSearch Benchmark, side by side on one private OpenSearch 2.19.6 (see
# docs/BENCHMARKS.md, "Search (issue 17)"): the same geonames-shaped corpus
# bulk-indexed in bulks of 5000 with 2 clients, then a term and a
# match_phrase query, closed loop, 2 clients.
#
#   cargo build --release -p loadcell && \
#   cargo build --release -p loadcell-testkit --example search_server && bench/search.sh
#
# Environment (defaults in brackets):
#   BENCH_DOCS documents [300000]  BENCH_QUERIES per query kind [5000]
#   BENCH_REPS [2]  BENCH_CLIENTS [2]
#   BENCH_WARMUP rounds of both tools first, not counted [3]
#   LOADCELL  binary to test [target/release/loadcell]
#   ESRALLY   the Rally to compare with: esrally, or its fork OpenSearch
#             Benchmark [a venv made under ~/.cache/loadcell-bench/osb with
#             `pip install opensearch-benchmark` on first use: esrally 2.13's
#             client refuses OpenSearch]
set -euo pipefail
cd "$(dirname "$0")/.."

LOADCELL=${LOADCELL:-target/release/loadcell}
SERVER=target/release/examples/search_server
for bin in "$LOADCELL" "$SERVER"; do
    [[ -x $bin ]] || { echo "no $bin: build it first (see the top of $0)" >&2; exit 1; }
done
if [[ -z ${ESRALLY:-} ]]; then
    venv=$HOME/.cache/loadcell-bench/osb
    [[ -x $venv/bin/opensearch-benchmark ]] ||
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q opensearch-benchmark; }
    ESRALLY=$venv/bin/opensearch-benchmark
fi

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-search
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it

# The server stops when its input closes: when this script exits.
coproc SEARCH { exec "$SERVER" opensearch; }
read -r URL SERVER_PID <&"${SEARCH[0]}" || { echo "OpenSearch did not start" >&2; exit 1; }
echo "OpenSearch $URL (pid $SERVER_PID)" >&2

python3 bench/search_corpus.py --dir "$out/track" --documents "${BENCH_DOCS:-300000}" \
    --bulk-size 5000 --clients "${BENCH_CLIENTS:-2}" --query-iterations "${BENCH_QUERIES:-5000}" >&2

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E 'Model name|MHz' || true
    echo "kernel: $(uname -srm)"
    echo "uptime: $(uptime)"
    echo "server: $(curl -s "$URL" | tr -d '\n' | head -c 400)"
    echo "rally: $("$ESRALLY" --version 2>&1 | tail -1)"
    echo "loadcell: sha256 $(sha256sum "$out/loadcell" | cut -c1-16)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/host.txt"
cat "$out/host.txt" >&2

ESRALLY=$ESRALLY python3 bench/search_bench.py --outdir "$out" --loadcell "$out/loadcell" \
    --url "$URL" --server-pid "$SERVER_PID" --track "$out/track" \
    --clients "${BENCH_CLIENTS:-2}" --queries "${BENCH_QUERIES:-5000}" --reps "${BENCH_REPS:-2}" \
    --warmup "${BENCH_WARMUP:-3}"
rm -f "$out/track/documents.json" # regenerated from the seed; the rest stays
echo "results: $out" >&2
