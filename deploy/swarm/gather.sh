#!/bin/sh
# Gathers each task's result from a Swarm service's logs into
# DIR/shard-I.json (loadcell-shard prints it between markers), then merges
# them into DIR/merged.json:
#   deploy/swarm/gather.sh SERVICE DIR
# Task by task, each task's stdout alone (`docker service logs --raw
# TASK`; the runs' live lines are on stderr): the whole service's logs at
# once hang, cut short, now and then (moby/moby#38640; here, 3 runs of 10
# of run.sh on Docker 20.10), where a task's own came whole every time.
# LOADCELL names the binary if it is not on PATH.
set -eu
service=${1:?usage: gather.sh SERVICE DIR}
dir=${2:?usage: gather.sh SERVICE DIR}
mkdir -p "$dir"
for task in $(docker service ps --quiet "$service"); do
    docker service logs --raw "$task" 2>/dev/null | awk -v dir="$dir" -v task="$task" '
        /^--- loadcell result shard [0-9]+ ---$/ { out = dir "/shard-" $5 ".json"; printf "" > out; next }
        /^--- end loadcell result ---$/ { close(out); out = ""; next }
        out != "" { print > out }
        END {
            if (out != "") {
                print "gather.sh: task " task ": its result is cut short in its log" > "/dev/stderr"
                exit 1
            }
        }'
done
"${LOADCELL:-loadcell}" merge "$dir"/shard-*.json --out "$dir/merged.json"
