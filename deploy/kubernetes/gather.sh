#!/bin/sh
# Gathers each shard's result from the Job's pod logs into DIR/shard-I.json
# (each pod prints its result between markers), then merges them.
#   deploy/kubernetes/gather.sh results/run-1
set -eu
dir=${1:?usage: gather.sh DIR}
mkdir -p "$dir"
for pod in $(kubectl get pods -l job-name=loadcell -o name); do
  kubectl logs "$pod" | awk -v dir="$dir" '
    /^--- loadcell result shard [0-9]+ ---$/ { out = dir "/shard-" $5 ".json"; next }
    /^--- end loadcell result ---$/ { close(out); out = ""; next }
    out != "" { print > out }'
done
loadcell merge "$dir"/shard-*.json --out "$dir/merged.json"
