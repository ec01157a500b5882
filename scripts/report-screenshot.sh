#!/usr/bin/env bash
# Makes docs/report-screenshot.png and docs/report-sweep-screenshot.png: the
# HTML report of real runs (a rate-limited run and a sweep of clients against
# the in-process sim:// server, so nothing needs installing but Chromium), as
# headless Chromium shows it. The first is the whole report of the run, down
# to its environment and configuration; the second the top of the sweep's:
# summary, findings and the scaling charts with the knees.
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
    --clients 1,2,4,8,16 --warmup 500ms --time 2s --report-interval 500ms --out sweep.json >/dev/null
"$LOADCELL" report run.json --html run.html
"$LOADCELL" report sweep.json --html sweep.html

chromium() { # headless Chromium, 1280 px wide, bounded in time; extra flags, then the page
    local page=${*: -1}
    timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
        --user-data-dir="$work/profile" "${@:1:$#-1}" "file://$work/$page" 2>/dev/null
}
height() { # page: its laid-out height, measured on a copy with a line of script
    # (the report itself has none, and a Content-Security-Policy forbidding any)
    sed -e '/Content-Security-Policy/d' \
        -e 's|</body>|<script>document.body.dataset.h = document.documentElement.scrollHeight</script></body>|' \
        "$1" >measure.html
    chromium --window-size=1280,1000 --dump-dom measure.html | grep -o 'data-h="[0-9]*"' | tr -dc 0-9
}
# The run's page varies in height (a network and disk chart only when there
# was traffic), so it is measured; the sweep's top part does not.
run_height=$(height run.html)
[[ $run_height ]] || { echo "could not measure the report's height in Chromium" >&2; exit 1; }
chromium --window-size="1280,$run_height" --screenshot="$work/run.png" run.html
chromium --window-size=1280,1490 --screenshot="$work/sweep.png" sweep.html
cd - >/dev/null
cp "$work/run.png" docs/report-screenshot.png
cp "$work/sweep.png" docs/report-sweep-screenshot.png
ls -l docs/report-screenshot.png docs/report-sweep-screenshot.png
