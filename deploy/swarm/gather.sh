#!/bin/sh
# Gathers each task's result from a Swarm service's logs into
# DIR/shard-I.json (loadcell-shard prints it between markers), then merges
# them into DIR/merged.json:
#   deploy/swarm/gather.sh SERVICE DIR
# `docker service logs` prefixes each line with its task
# (`loadcell-….2.<task id>@<node>    | `) and interleaves the tasks' lines:
# they are sorted out by that prefix. Stderr (the runs' live lines) is
# left out. LOADCELL names the binary if it is not on PATH.
set -eu
service=${1:?usage: gather.sh SERVICE DIR}
dir=${2:?usage: gather.sh SERVICE DIR}
mkdir -p "$dir"
docker service logs --no-trunc "$service" 2>/dev/null | awk -v dir="$dir" '
    {
        bar = index($0, "| ")
        if (bar == 0) next
        task = substr($0, 1, bar - 1)
        sub(/ +$/, "", task)
        line = substr($0, bar + 2)
    }
    line ~ /^--- loadcell result shard [0-9]+ ---$/ {
        split(line, word, " ")
        out[task] = dir "/shard-" word[5] ".json"
        printf "" > out[task]
        next
    }
    line == "--- end loadcell result ---" { close(out[task]); delete out[task]; next }
    task in out { print line > out[task] }'
"${LOADCELL:-loadcell}" merge "$dir"/shard-*.json --out "$dir/merged.json"
