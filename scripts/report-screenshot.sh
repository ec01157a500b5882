#!/usr/bin/env bash
# Makes docs/report-screenshot.png: the HTML report of real runs (a
# rate-limited run and a sweep of clients against the in-process sim://
# server, so nothing needs installing but Chromium), as headless Chromium
# shows it.
#
#   cargo build --release && scripts/report-screenshot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LOADCELL=${LOADCELL:-$PWD/target/release/loadcell}
[[ -x $LOADCELL ]] || { echo "no $LOADCELL: run 'cargo build --release' first (or set LOADCELL)" >&2; exit 1; }
[[ -x /usr/bin/chromium ]] || { echo "no chromium: run scripts/install-test-deps.sh" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$LOADCELL" run kv --target 'sim://?latency=lognormal:1ms:0.4&concurrency=8' --threads 1 --clients 16 \
    --rate 5000 --time 6s --report-interval 500ms --label instance=demo --out run.json >/dev/null
"$LOADCELL" sweep kv --target 'sim://?latency=fixed:1ms&concurrency=4' --threads 1 \
    --clients 1,2,4,8,16 --time 2s --report-interval 500ms --out sweep.json >/dev/null
"$LOADCELL" report run.json sweep.json --html report.html
"$LOADCELL" report sweep.json --html sweep.html
shot() { # page height png
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
        --user-data-dir="$work/profile" --window-size="1280,$2" \
        --screenshot="$work/$3" "file://$work/$1" 2>/dev/null
}
shot report.html 2600 report.png
shot sweep.html 1500 sweep.png
cd - >/dev/null
cp "$work/report.png" docs/report-screenshot.png
cp "$work/sweep.png" docs/report-sweep-screenshot.png
ls -l docs/report-screenshot.png docs/report-sweep-screenshot.png
