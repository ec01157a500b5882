#!/usr/bin/env bash
# Installs what the tests need (Debian packages, when missing), then runs
# every check and test. The tests start their own servers on free loopback
# ports and stop them. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

scripts/install-test-deps.sh
# A clean clone builds once: incremental caches would only double the disk.
export CARGO_INCREMENTAL=0
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
