#!/usr/bin/env bash
# S3 (docs/S3-PROXY.md): a sharding proxy versus direct, from two client
# "machines" (network namespaces) started together and merged.
#
#   cargo build -p loadcell && sudo bench/s3-proxy.sh
#
# Direct: both clients against one MariaDB holding the whole sbtest1.
# Proxy:  both clients against ShardingSphere-Proxy 5.1.0, which shards
#         sbtest1 by HASH_MOD(id, 2) over two MariaDB.
# Per workload (oltp_insert --auto-inc=off, oltp_point_select,
# oltp_update_index) and mode, each client runs `loadcell sweep --shard I/2`
# with one --start-at, so every step starts together; `loadcell merge`
# merges the two sweeps and `loadcell compare` puts direct and proxy side by
# side, point by point. The proxy's CPU is sampled with --server-pid, the
# load average beside every run. As in the field report, inserts go into an
# empty table: `sbtest1` of a second database, sbtest_ins, prepared empty by
# `loadcell prepare oltp_insert --auto-inc=off` on every server and served
# by a second proxy schema; the others read and update the preloaded sbtest.
#
# Environment (defaults in brackets):
#   LOADCELL [target/debug/loadcell]   THREADS [8,16,32,64,128,256,512]
#   REPEAT [3]   TIME [2s]   WARMUP [1s]   STEP_GAP [6s]   TABLE_SIZE [100000]
#   WORKLOADS [oltp_insert oltp_point_select oltp_update_index]
# Needs root (ip netns), java, mvn (the proxy's jars come from Maven Central
# into ~/.m2 and the test kit's /var/tmp/loadcell-testkit once).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/debug/loadcell}
THREADS=${THREADS:-8,16,32,64,128,256,512}
REPEAT=${REPEAT:-3} TIME=${TIME:-2s} WARMUP=${WARMUP:-1s} STEP_GAP=${STEP_GAP:-6s}
TABLE_SIZE=${TABLE_SIZE:-100000}
WORKLOADS=${WORKLOADS:-oltp_insert oltp_point_select oltp_update_index}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build -p loadcell' first (or set LOADCELL)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "bench/s3-proxy.sh needs root for ip netns" >&2; exit 1; }

out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-s3-proxy
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it
LC=$out/loadcell

# The proxy's jars, once per machine, where the test kit keeps them.
lib=/var/tmp/loadcell-testkit/shardingsphere-proxy-5.1.0/lib
if [[ ! -e $lib/shardingsphere-proxy-bootstrap-5.1.0.jar ]]; then
    mkdir -p "$lib"
    mvn -q -B -f crates/testkit/src/shardingsphere-pom.xml dependency:copy-dependencies -DoutputDirectory="$lib"
fi

# Two client namespaces, each with its own address on a bridge in this
# namespace, which holds the servers at 10.203.30.1.
HOST=10.203.30.1 BRIDGE=lcs3-br
netns_down() {
    for i in 0 1; do ip netns del "lcs3-$i" 2>/dev/null || true; done
    ip link del "$BRIDGE" 2>/dev/null || true
}
netns_down
ip link add "$BRIDGE" type bridge
ip addr add "$HOST/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for i in 0 1; do
    ip netns add "lcs3-$i"
    ip -n "lcs3-$i" link set lo up
    ip link add "lcs3-h$i" type veth peer name "lcs3-c$i" netns "lcs3-$i"
    ip link set "lcs3-h$i" master "$BRIDGE" up
    ip -n "lcs3-$i" addr add "10.203.30.$((i + 2))/24" dev "lcs3-c$i"
    ip -n "lcs3-$i" link set "lcs3-c$i" up
done

pids=() dirs=()
stop_all() {
    set +e # every step, whatever one of them returns
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && _bench_wait_gone "$p" 30; done
    for d in "${dirs[@]}"; do [[ $d == "$BENCH_TMP"/bench-mariadb-* ]] && rm -rf "$d"; done
    netns_down
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Three MariaDB: the direct one and the proxy's two, reachable from the
# namespaces (the bridge's address). Each holds sbtest (sbtest1 of
# TABLE_SIZE rows) and sbtest_ins (sbtest1 empty, for the inserts, whose
# random ids would collide with the preloaded ones).
ports=() sockets=()
for n in 0 1 2; do
    BENCH_MARIADB_OPTS="--bind-address=0.0.0.0 --max-connections=1200" mariadb_start
    pids+=("$MARIADB_PID") dirs+=("$MARIADB_DIR") ports+=("$MARIADB_PORT") sockets+=("$MARIADB_SOCKET")
    mariadb --no-defaults --protocol=socket --socket="$MARIADB_SOCKET" -uroot -e "
        CREATE DATABASE sbtest_ins;
        GRANT ALL PRIVILEGES ON sbtest_ins.* TO 'sbtest'@'%';
        GRANT ALL PRIVILEGES ON sbtest_ins.* TO 'sbtest'@'127.0.0.1';
        GRANT ALL PRIVILEGES ON sbtest_ins.* TO 'sbtest'@'localhost';"
    "$LC" prepare oltp_point_select --target "mysql://sbtest:sbtest@127.0.0.1:$MARIADB_PORT/sbtest" \
        --table-size "$TABLE_SIZE" >"$out/prepare-$n.log" 2>&1
    "$LC" prepare oltp_insert --auto-inc=off --target "mysql://sbtest:sbtest@127.0.0.1:$MARIADB_PORT/sbtest_ins" \
        >>"$out/prepare-$n.log" 2>&1
done

# ShardingSphere-Proxy over the other two: each holds the whole table, as
# the direct one does; the proxy reads and writes each id on the server its
# hash names.
conf=$out/proxy-conf
mkdir -p "$conf" "$out/proxy-repo"
PROXY_PORT=$(bench_free_port)
cat >"$conf/server.yaml" <<EOF
mode:
  type: Standalone
  repository:
    type: File
    props:
      path: $out/proxy-repo
  overwrite: true
rules:
  - !AUTHORITY
    users:
      - sbtest@%:sbtest
    provider:
      type: ALL_PRIVILEGES_PERMITTED
EOF
proxy_schema() { # database: one logical schema over that database on both
    echo "schemaName: $1"
    echo "dataSources:"
    for i in 0 1; do
        cat <<EOF
  ds_$i:
    url: jdbc:mysql://127.0.0.1:${ports[$((i + 1))]}/$1?useSSL=false&allowPublicKeyRetrieval=true
    username: sbtest
    password: sbtest
    maxPoolSize: 600
    minPoolSize: 1
EOF
    done
    cat <<'EOF'
rules:
- !SHARDING
  tables:
    sbtest1:
      actualDataNodes: ds_${0..1}.sbtest1
      databaseStrategy:
        standard:
          shardingColumn: id
          shardingAlgorithmName: id_hash
  shardingAlgorithms:
    id_hash:
      type: HASH_MOD
      props:
        sharding-count: 2
EOF
}
proxy_schema sbtest >"$conf/config-sharding.yaml"
proxy_schema sbtest_ins >"$conf/config-sharding-ins.yaml"
cat >"$conf/logback.xml" <<'EOF'
<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="out"/></root>
</configuration>
EOF
# From $out: its transaction manager writes logs/ where it runs.
(cd "$out" && exec java -Xms1g -Xmx1g -cp "$conf:$lib/*" org.apache.shardingsphere.proxy.Bootstrap \
    "$PROXY_PORT" "$conf" </dev/null >"$out/proxy.log" 2>&1) &
PROXY_PID=$!
pids+=("$PROXY_PID")
_bench_wait_port "$PROXY_PID" "$PROXY_PORT" 180 || { tail -20 "$out/proxy.log" >&2; exit 1; }
PROXY=mysql://sbtest:sbtest@$HOST:$PROXY_PORT
DIRECT=mysql://sbtest:sbtest@$HOST:${ports[0]}
echo "direct MariaDB :${ports[0]}, proxy pid $PROXY_PID :$PROXY_PORT over :${ports[1]} :${ports[2]}" | tee "$out/setup.txt"
# Warm the proxy's JIT on both schemas first, as the field report did
# ("JIT-hot code: tested after many calls"): a cold JVM on a busy host
# can take more than the 5 s loadcell waits for a server's greeting.
# Point selects only, so that no row is added to the inserts' table.
for db in sbtest sbtest_ins; do
    "$LC" run oltp_point_select --target "mysql://sbtest:sbtest@127.0.0.1:$PROXY_PORT/$db" \
        --table-size "$TABLE_SIZE" --threads 16 --time 20s --results-dir "$out/warmup" >>"$out/proxy-warmup.log" 2>&1
done

# One sweep from both namespaces, started together, merged.
sweep() { # mode url workload [run options...]
    local mode=$1 url=$2 workload=$3
    shift 3
    local start i clients=()
    start=$(date -u -d "+15 seconds" +%Y-%m-%dT%H:%M:%SZ)
    for i in 0 1; do
        ip netns exec "lcs3-$i" "$LC" sweep "$workload" --target "$url" --table-size "$TABLE_SIZE" \
            --threads "$THREADS" --time "$TIME" --warmup "$WARMUP" --repeat "$REPEAT" \
            --step-gap "$STEP_GAP" --shard "$i/2" --start-at "$start" --label "mode=$mode" "$@" \
            --results-dir "$out/steps" --out "$out/$workload-$mode-shard$i.json" \
            >"$out/$workload-$mode-shard$i.log" 2>&1 &
        clients+=($!)
    done
    wait "${clients[@]}" || true
    "$LC" merge "$out/$workload-$mode-shard0.json" "$out/$workload-$mode-shard1.json" \
        --out "$out/$workload-$mode.json" 2>&1 | tee "$out/$workload-$mode-merge.log"
}

# Alternate which mode goes first, workload by workload (this machine is
# shared, and its load drifts).
other() { [[ $1 == direct ]] && echo proxy || echo direct; }
first=direct
for workload in $WORKLOADS; do
    db=sbtest extra=()
    [[ $workload == oltp_insert ]] && db=sbtest_ins extra=(--auto-inc=off)
    for mode in "$first" "$(other "$first")"; do
        if [[ $mode == direct ]]; then
            sweep direct "$DIRECT/$db" "$workload" --server-pid "${pids[0]}" "${extra[@]}"
        else
            sweep proxy "$PROXY/$db" "$workload" --server-pid "$PROXY_PID" "${extra[@]}"
        fi
    done
    first=$(other "$first")
    "$LC" compare "$out/$workload-direct.json" "$out/$workload-proxy.json" | tee "$out/$workload-compare.md"
done
# Where the inserts landed: all on the direct server, split by the hash
# over the proxy's two.
if [[ " $WORKLOADS " == *" oltp_insert "* ]]; then
    for n in 0 1 2; do
        printf 'server %s sbtest_ins.sbtest1 rows: ' "$n"
        mariadb --no-defaults --protocol=socket --socket="${sockets[$n]}" -uroot -N -e "SELECT COUNT(*) FROM sbtest_ins.sbtest1"
    done | tee "$out/insert-rows.txt"
fi
echo "Results in $out"
