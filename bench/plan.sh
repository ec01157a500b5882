#!/usr/bin/env bash
# The worked example of docs/capacity-planning.md: labelled runs of the
# 80/20 key-value mix against Redis Clusters of 1 to 4 nodes (standing in
# for node counts of one instance type) and one memcached (a second type,
# one node), then `loadcell plan` on them with examples/prices.toml.
#
#   cargo build --release && bench/plan.sh
#
# Environment (defaults in brackets):
#   BENCH_TIME  seconds per run [10]   BENCH_NODES  node counts [1 2 3 4]
#   LOADCELL    binary [target/release/loadcell]
#   TARGET      throughput to plan for [150k]   HEADROOM [30%]
#
# Every server listens on a free 127.0.0.1 port and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/release/loadcell}
BENCH_TIME=${BENCH_TIME:-10}
BENCH_NODES=${BENCH_NODES:-1 2 3 4}
TARGET=${TARGET:-150k}
HEADROOM=${HEADROOM:-30%}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2; exit 1; }
LOADCELL=$(realpath "$LOADCELL")
for bin in redis-server redis-cli memcached; do
    command -v $bin >/dev/null || { echo "$bin not installed (scripts/install-test-deps.sh)" >&2; exit 1; }
done

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-plan
mkdir -p "$out"
tmp=$(mktemp -d "$BENCH_TMP/bench-plan-XXXXXX")
chmod 755 "$tmp" # the redis user must reach its data dir

pids=()
stop_servers() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && _bench_wait_gone "$p" 10; done
    pids=()
    return 0
}
trap 'stop_servers; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

run_args=(mix-80-20 --prepare --record-count 100000 --threads 2 --clients 16
    --time "${BENCH_TIME}s" --warmup 2s)

# A Redis Cluster of $1 masters. redis-cli --cluster create wants 3 or
# more, so slots are assigned by hand: node i takes an equal share.
redis_cluster_start() {
    local n=$1 i port bus info first="" first_bus="" seeds=() user=()
    [[ $(id -u) == 0 ]] && user=(setpriv --reuid=redis --regid=redis --init-groups --)
    for ((i = 0; i < n; i++)); do
        port=$(bench_free_port) bus=$(bench_free_port)
        mkdir -p "$tmp/redis-$n-$i"
        [[ $(id -u) == 0 ]] && chown redis:redis "$tmp/redis-$n-$i"
        "${user[@]}" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
            --dir "$tmp/redis-$n-$i" --cluster-enabled yes \
            --cluster-config-file "$tmp/redis-$n-$i/nodes.conf" \
            --cluster-port "$bus" >"$out/redis-$n-$i.log" 2>&1 &
        pids+=($!)
        _bench_wait_port "$!" "$port" 30 || { echo "redis-server did not start" >&2; exit 1; }
        redis-cli -p "$port" CLUSTER ADDSLOTSRANGE $((16384 * i / n)) $((16384 * (i + 1) / n - 1)) >/dev/null
        # The bus port is not the default port + 10000, so MEET names it.
        [[ -n $first ]] && redis-cli -p "$port" CLUSTER MEET 127.0.0.1 "$first" "$first_bus" >/dev/null
        first=${first:-$port} first_bus=${first_bus:-$bus}
        seeds+=("127.0.0.1:$port")
    done
    # Ready when every node knows all n and serves every slot.
    local seed ready
    for ((i = 0; i < 300; i++)); do
        ready=1
        for seed in "${seeds[@]}"; do
            info=$(redis-cli -p "${seed#*:}" CLUSTER INFO)
            [[ $info == *"cluster_state:ok"* && $info == *"cluster_known_nodes:$n"* ]] || ready=0
        done
        ((ready)) && break
        sleep 0.1
    done
    ((ready)) || { echo "redis cluster of $n did not become ready" >&2; exit 1; }
    local IFS=,
    REDIS_CLUSTER_URL="redis+cluster://${seeds[*]}"
}

for n in $BENCH_NODES; do
    redis_cluster_start "$n"
    echo "== r5.large (Redis Cluster) nodes=$n: $REDIS_CLUSTER_URL" >&2
    "$LOADCELL" run "${run_args[@]}" --target "$REDIS_CLUSTER_URL" \
        --label instance=r5.large --label nodes="$n" --out "$out/redis-$n.json" | tail -n 25 >&2
    stop_servers
done

port=$(bench_free_port)
mc_user=(); [[ $(id -u) == 0 ]] && mc_user=(-u memcache)
memcached "${mc_user[@]}" -l 127.0.0.1 -p "$port" -m 512 -t 1 >"$out/memcached.log" 2>&1 &
pids+=($!)
_bench_wait_port "$!" "$port" 30 || { echo "memcached did not start" >&2; exit 1; }
echo "== c5.xlarge (memcached) nodes=1" >&2
"$LOADCELL" run "${run_args[@]}" --target "memcached://127.0.0.1:$port" \
    --label instance=c5.xlarge --label nodes=1 --out "$out/memcached-1.json" | tail -n 25 >&2
stop_servers

cd "$out"
"$LOADCELL" report --markdown - redis-*.json memcached-1.json | tee spec-table.md
plan=("$LOADCELL" plan --prices "$OLDPWD/examples/prices.toml" --target-throughput "$TARGET"
    --headroom "$HEADROOM" --scaling c5.xlarge=linear redis-*.json memcached-1.json)
"${plan[@]}" --html plan.html | tee plan.txt
"${plan[@]}" --json >plan.json
echo "results in $out" >&2
