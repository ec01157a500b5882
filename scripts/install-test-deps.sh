#!/usr/bin/env bash
# Install what loadcell's integration tests and benchmarks need (Debian 12).
# Idempotent: installs only missing packages; never starts any service
# (the tests start their own servers via crates/testkit).
set -euo pipefail

PACKAGES=(
  mariadb-server mariadb-client
  postgresql postgresql-contrib
  sysbench
  fio
  redis-server redis-tools
  memcached
  mosquitto rabbitmq-server
  # Builds and runs the image (deploy/image) in the container tests; the
  # image's entry-point script runs on busybox-static's shell.
  docker.io busybox-static
  nginx-light haproxy
  wrk apache2-utils
  procps
  openssl
  chromium
  unzip
  influxdb prometheus prometheus-node-exporter
  # rdkafka builds its bundled librdkafka (and zstd) with configure and make.
  gcc make
)

# Which packages are not yet installed?
missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "install-test-deps: installing: ${missing[*]}"
  # apt needs root; use sudo only when we are not root already.
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-test-deps: run as root (or install sudo)" >&2; exit 1; }
    SUDO=(sudo)
  fi
  "${SUDO[@]}" apt-get update
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "install-test-deps: all packages already installed"
fi

# Java and Maven read HdrHistogram logs with HdrHistogram's own tools in the
# tests, and run the search servers (OpenSearch 2, Elasticsearch 7), which
# need a JDK 17 or 21: they use the security manager, which later JDKs
# dropped. crates/testkit looks for one under /usr/lib/jvm.
java_pkgs=()
compgen -G "/usr/lib/jvm/java-17-openjdk-*/bin/java" >/dev/null \
  || compgen -G "/usr/lib/jvm/java-21-openjdk-*/bin/java" >/dev/null \
  || java_pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || java_pkgs+=(maven)
if ((${#java_pkgs[@]})); then
  echo "install-test-deps: installing: ${java_pkgs[*]}"
  SUDO=()
  [[ $(id -u) -ne 0 ]] && SUDO=(sudo)
  "${SUDO[@]}" apt-get update
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${java_pkgs[@]}"
fi
HDR_JAR="$HOME/.m2/repository/org/hdrhistogram/HdrHistogram/2.2.2/HdrHistogram-2.2.2.jar"
if [[ ! -f "$HDR_JAR" ]]; then
  echo "install-test-deps: fetching HdrHistogram 2.2.2 from Maven Central"
  mvn -q dependency:get -Dartifact=org.hdrhistogram:HdrHistogram:2.2.2
fi

# The search servers' integ-test zips (crates/testkit unzips them once into
# /var/tmp/loadcell-testkit, and would fetch them itself if missing).
for zip in org.opensearch.distribution.integ-test-zip:opensearch:2.19.6 \
           org.elasticsearch.distribution.integ-test-zip:elasticsearch:7.10.2; do
  IFS=: read -r group artifact version <<<"$zip"
  if [[ ! -f "$HOME/.m2/repository/${group//.//}/$artifact/$version/$artifact-$version.zip" ]]; then
    echo "install-test-deps: fetching $artifact $version from Maven Central"
    mvn -q dependency:get -Dartifact="$zip:zip"
  fi
done

# QuestDB's jar (one jar, native libraries inside), run by crates/testkit.
QUESTDB_JAR="$HOME/.m2/repository/org/questdb/questdb/9.3.4/questdb-9.3.4.jar"
if [[ ! -f "$QUESTDB_JAR" ]]; then
  echo "install-test-deps: fetching QuestDB 9.3.4 from Maven Central"
  mvn -q dependency:get -Dartifact=org.questdb:questdb:9.3.4
fi

# Cassandra 4.1.10's jars (crates/testkit/assets/cassandra/pom.xml), copied
# by crates/testkit into /var/tmp/loadcell-testkit/cassandra-4.1.10/lib at its
# first start; fetched here into ~/.m2 so that tests do not download.
CASSANDRA_JAR="$HOME/.m2/repository/org/apache/cassandra/cassandra-all/4.1.10/cassandra-all-4.1.10.jar"
if [[ ! -f "$CASSANDRA_JAR" ]]; then
  echo "install-test-deps: fetching Cassandra 4.1.10 and its dependencies from Maven Central"
  (cd "$(dirname "$0")/../crates/testkit/assets/cassandra" && mvn -q -B dependency:resolve)
fi

# HBase 2.5.8 and its Thrift2 gateway (crates/testkit/assets/hbase/pom.xml),
# copied by crates/testkit into /var/tmp/loadcell-testkit/hbase-2.5.8/lib the
# same way.
HBASE_JAR="$HOME/.m2/repository/org/apache/hbase/hbase-thrift/2.5.8/hbase-thrift-2.5.8.jar"
if [[ ! -f "$HBASE_JAR" ]]; then
  echo "install-test-deps: fetching HBase 2.5.8 and its dependencies from Maven Central"
  (cd "$(dirname "$0")/../crates/testkit/assets/hbase" && mvn -q -B dependency:resolve)
fi

# ShardingSphere-Proxy 5.1.0's jars (crates/testkit/src/shardingsphere-pom.xml),
# copied by crates/testkit into
# /var/tmp/loadcell-testkit/shardingsphere-proxy-5.1.0/lib at its first start
# under a 120 s limit; fetched here into ~/.m2 first, since downloading its
# ~200 jars took longer than that on a fresh machine.
# Until testkit has copied them, resolve (quick once ~/.m2 holds them all).
SS_JAR=/var/tmp/loadcell-testkit/shardingsphere-proxy-5.1.0/lib/shardingsphere-proxy-bootstrap-5.1.0.jar
if [[ ! -f "$SS_JAR" ]]; then
  echo "install-test-deps: fetching ShardingSphere-Proxy 5.1.0 and its dependencies from Maven Central"
  staging=$(mktemp -d /var/tmp/loadcell-shardingsphere-pom.XXXXXX)
  cp "$(dirname "$0")/../crates/testkit/src/shardingsphere-pom.xml" "$staging/pom.xml"
  mvn -q -B -f "$staging/pom.xml" dependency:resolve
  rm -rf "$staging"
fi

# VictoriaMetrics has no Debian package: crates/testkit builds it once with
# `go install` (its version stamped in, as its releases are) into
# /var/tmp/loadcell-testkit, and would do so itself if missing (30 s).
VM_VERSION=v1.151.0
VM_DIR=/var/tmp/loadcell-testkit/victoria-metrics-$VM_VERSION
if [[ ! -x "$VM_DIR/victoria-metrics" ]]; then
  GO=$(command -v go || echo /usr/local/go/bin/go)
  if [[ -x "$GO" ]]; then
    echo "install-test-deps: building VictoriaMetrics $VM_VERSION"
    staging="/var/tmp/loadcell-testkit/.victoria-metrics-$VM_VERSION.$$"
    mkdir -p "$staging"
    GOBIN="$staging/bin" "$GO" install \
      "-ldflags=-X=github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=victoria-metrics-$VM_VERSION" \
      "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$VM_VERSION"
    mv "$staging/bin" "$VM_DIR" 2>/dev/null || true
    rm -rf "$staging"
  else
    echo "install-test-deps: note: no Go toolchain; the VictoriaMetrics tests need one (go 1.24+)"
  fi
fi

# Rust toolchain: must already exist (we do not download installers here).
if command -v cargo >/dev/null; then
  CARGO=$(command -v cargo)
elif [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  CARGO="$HOME/.cargo/bin/cargo"
  echo "install-test-deps: note: add \$HOME/.cargo/bin to PATH"
else
  echo "install-test-deps: ERROR: cargo not found (not on PATH, not in ~/.cargo/bin)." >&2
  echo "  Install the Rust toolchain with rustup: https://rustup.rs" >&2
  exit 1
fi
echo "install-test-deps: $("$CARGO" --version)"
echo "install-test-deps: ok"

# Kafka 3.9.2's jars (the broker crates/testkit starts, and Kafka's own perf
# tools for bench/stream.sh), from Maven Central through the pom testkit
# uses, into the directory testkit would otherwise fill at its first run.
KAFKA_HOME=/var/tmp/loadcell-testkit/kafka-3.9.2
if [[ ! -f "$KAFKA_HOME/lib/kafka_2.13-3.9.2.jar" ]]; then
  echo "install-test-deps: fetching Kafka 3.9.2's jars from Maven Central"
  staging=$(mktemp -d /var/tmp/loadcell-kafka-jars.XXXXXX)
  cp "$(dirname "$0")/../crates/testkit/src/kafka-pom.xml" "$staging/pom.xml"
  mvn -q -f "$staging/pom.xml" dependency:copy-dependencies -DoutputDirectory="$staging/lib"
  rm "$staging/pom.xml"
  mkdir -p "$(dirname "$KAFKA_HOME")"
  mv "$staging" "$KAFKA_HOME"
fi
