#!/usr/bin/env bash
# S3 (docs/S3-PROXY.md): a sharding proxy versus direct, from two client
# "machines" (network namespaces) started together. This script only sets
# up the servers and the namespaces; bench/s3-proxy.toml is the campaign.
#
#   cargo build -p loadcell && sudo bench/s3-proxy.sh [--var threads=8,64 …]
#
# Three MariaDB (the direct one and the proxy's two), each with sbtest
# (sbtest1 of 100,000 rows) and sbtest_ins (sbtest1 empty, for the
# inserts), and ShardingSphere-Proxy 5.1.0 sharding both by
# HASH_MOD(id, 2). Then `loadcell suite run bench/s3-proxy.toml --shard I/2`
# in each namespace with one --start-at, and `loadcell merge` of the two
# suite directories: report.md holds the tables. Arguments go to both
# suite runs (`--var time=5s`). Needs root (ip netns), java, mvn.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/servers.sh
source bench/servers.sh
LOADCELL=${LOADCELL:-target/debug/loadcell}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build -p loadcell' first (or set LOADCELL)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "bench/s3-proxy.sh needs root for ip netns" >&2; exit 1; }
out=$PWD/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-s3-proxy
mkdir -p "$out"
cp "$LOADCELL" "$out/loadcell" # a rebuild mid-benchmark cannot swap it
LC=$out/loadcell

# The proxy's jars, once per machine, where the test kit keeps them.
lib=/var/tmp/loadcell-testkit/shardingsphere-proxy-5.1.0/lib
[[ -e $lib/shardingsphere-proxy-bootstrap-5.1.0.jar ]] ||
    mvn -q -B -f crates/testkit/src/shardingsphere-pom.xml dependency:copy-dependencies -DoutputDirectory="$lib"

# Two client namespaces on a bridge in this namespace, which holds the
# servers at $HOST.
HOST=10.203.30.1 BRIDGE=lcs3-br
netns_down() {
    for i in 0 1; do ip netns del "lcs3-$i" 2>/dev/null || true; done
    ip link del "$BRIDGE" 2>/dev/null || true
}
netns_down
ip link add "$BRIDGE" type bridge && ip addr add "$HOST/24" dev "$BRIDGE" && ip link set "$BRIDGE" up
for i in 0 1; do
    ip netns add "lcs3-$i" && ip -n "lcs3-$i" link set lo up
    ip link add "lcs3-h$i" type veth peer name "lcs3-c$i" netns "lcs3-$i"
    ip link set "lcs3-h$i" master "$BRIDGE" up
    ip -n "lcs3-$i" addr add "10.203.30.$((i + 2))/24" dev "lcs3-c$i" && ip -n "lcs3-$i" link set "lcs3-c$i" up
done

pids=() dirs=() ports=() sockets=()
stop_all() {
    set +e # every step, whatever one of them returns
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && _bench_wait_gone "$p" 30; done
    for d in "${dirs[@]}"; do [[ $d == "$BENCH_TMP"/bench-mariadb-* ]] && rm -rf "$d"; done
    netns_down
}
trap stop_all EXIT
trap 'exit 130' INT TERM

for n in 0 1 2; do
    BENCH_MARIADB_OPTS="--bind-address=0.0.0.0 --max-connections=1200" mariadb_start
    pids+=("$MARIADB_PID") dirs+=("$MARIADB_DIR") ports+=("$MARIADB_PORT") sockets+=("$MARIADB_SOCKET")
    for u in "'sbtest'@'%'" "'sbtest'@'127.0.0.1'" "'sbtest'@'localhost'"; do
        echo "CREATE DATABASE IF NOT EXISTS sbtest_ins; GRANT ALL PRIVILEGES ON sbtest_ins.* TO $u;"
    done | mariadb --no-defaults --protocol=socket --socket="$MARIADB_SOCKET" -uroot
    url=mysql://sbtest:sbtest@127.0.0.1:$MARIADB_PORT
    "$LC" prepare oltp_point_select --target "$url/sbtest" --table-size 100000 >"$out/prepare-$n.log" 2>&1
    "$LC" prepare oltp_insert --auto-inc=off --target "$url/sbtest_ins" >>"$out/prepare-$n.log" 2>&1
done

# The proxy over servers 1 and 2: one logical schema per database.
conf=$out/proxy-conf PROXY_PORT=$(bench_free_port)
mkdir -p "$conf" "$out/proxy-repo"
printf 'mode:\n  type: Standalone\n  repository:\n    type: File\n    props:\n      path: %s\n  overwrite: true\nrules:\n  - !AUTHORITY\n    users:\n      - sbtest@%%:sbtest\n    provider:\n      type: ALL_PRIVILEGES_PERMITTED\n' \
    "$out/proxy-repo" >"$conf/server.yaml"
for db in sbtest sbtest_ins; do
    {
        printf 'schemaName: %s\ndataSources:\n' "$db"
        for i in 0 1; do
            printf '  ds_%s:\n    url: jdbc:mysql://127.0.0.1:%s/%s?useSSL=false&allowPublicKeyRetrieval=true\n    username: sbtest\n    password: sbtest\n    maxPoolSize: 600\n    minPoolSize: 1\n' \
                "$i" "${ports[$((i + 1))]}" "$db"
        done
        printf 'rules:\n- !SHARDING\n  tables:\n    sbtest1:\n      actualDataNodes: ds_${0..1}.sbtest1\n      databaseStrategy:\n        standard:\n          shardingColumn: id\n          shardingAlgorithmName: id_hash\n  shardingAlgorithms:\n    id_hash:\n      type: HASH_MOD\n      props:\n        sharding-count: 2\n'
    } >"$conf/config-sharding-$db.yaml"
done
printf '<configuration><appender name="out" class="ch.qos.logback.core.ConsoleAppender"><encoder><pattern>%%d{HH:mm:ss.SSS} %%-5level %%logger{36} - %%msg%%n</pattern></encoder></appender><root level="WARN"><appender-ref ref="out"/></root></configuration>\n' >"$conf/logback.xml"
# From $out: its transaction manager writes logs/ where it runs.
(cd "$out" && exec java -Xms1g -Xmx1g -cp "$conf:$lib/*" org.apache.shardingsphere.proxy.Bootstrap \
    "$PROXY_PORT" "$conf" </dev/null >"$out/proxy.log" 2>&1) &
pids+=($!)
_bench_wait_port "${pids[3]}" "$PROXY_PORT" 180 || { tail -20 "$out/proxy.log" >&2; exit 1; }
echo "direct MariaDB :${ports[0]}, proxy pid ${pids[3]} :$PROXY_PORT over :${ports[1]} :${ports[2]}" | tee "$out/setup.txt"

# The suite from both namespaces, started together, then merged.
start=$(date -u -d "+30 seconds" +%Y-%m-%dT%H:%M:%SZ) clients=()
for i in 0 1; do
    ip netns exec "lcs3-$i" "$LC" suite run bench/s3-proxy.toml --shard "$i/2" --start-at "$start" \
        --var "direct=mysql://sbtest:sbtest@$HOST:${ports[0]}" --var "proxy=mysql://sbtest:sbtest@$HOST:$PROXY_PORT" \
        --out "$out/shard$i" "$@" >"$out/shard$i.log" 2>&1 &
    clients+=($!)
done
wait "${clients[@]}" || true
"$LC" merge "$out/shard0" "$out/shard1" --out "$out/suite" 2>&1 | tee "$out/merge.log"
# Where the inserts landed: all on the direct server, split by the hash
# over the proxy's two.
for n in 0 1 2; do
    printf 'server %s sbtest_ins.sbtest1 rows: ' "$n"
    mariadb --no-defaults --protocol=socket --socket="${sockets[$n]}" -uroot -N -e "SELECT COUNT(*) FROM sbtest_ins.sbtest1"
done | tee "$out/insert-rows.txt"
echo "Tables in $out/suite/report.md"
