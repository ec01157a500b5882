#!/bin/sh
# One loadcell run split over N tasks of a Docker Swarm replicated-job, each
# running the image's loadcell-shard (as the Kubernetes Job does), then
# their results gathered from the service's logs and merged:
#   deploy/swarm/run.sh RUN_ENV DIR [IMAGE]
# RUN_ENV is a docker --env-file (KEY=VALUE lines, nothing quoted): SHARDS,
# WORKLOAD, TARGET, OPTIONS, START_AT and optionally WATCH; see run.env.
# DIR gets shard-I.json and merged.json. The service is removed at the end.
set -eu
env_file=${1:?usage: run.sh RUN_ENV DIR [IMAGE]}
dir=${2:?usage: run.sh RUN_ENV DIR [IMAGE]}
image=${3:-loadcell:latest}
here=$(cd "$(dirname "$0")" && pwd)
shards=$(sed -n 's/^SHARDS=//p' "$env_file")
[ -n "$shards" ] || { echo "run.sh: $env_file sets no SHARDS" >&2; exit 2; }
service=${SERVICE:-loadcell-$(date +%s)}
# A task per shard, all at once; the host's network, as a generator on the
# host. A replicated-job numbers its tasks' slots from 0, as an Indexed Job
# its completion indexes (loadcell-shard reads the slot). Swarm runs a
# job's failed task again whatever --restart-condition says, so
# loadcell-shard exits 0 under it: a shard that failed shows as missing
# when the results are merged.
docker service create --quiet --detach --name "$service" \
    --mode replicated-job --replicas "$shards" --max-concurrent "$shards" \
    --restart-condition none --network host \
    --env-file "$env_file" --env 'SWARM_TASK_SLOT={{.Task.Slot}}' \
    --entrypoint /usr/local/bin/loadcell-shard "$image" >/dev/null
echo "run.sh: service $service: $shards shards" >&2
# Until every task completed, or one was rejected (the image missing on a
# node): what there is is gathered either way.
while :; do
    states=$(docker service ps "$service" --filter desired-state=complete \
        --format '{{.CurrentState}}')
    complete=$(printf '%s\n' "$states" | grep -c '^Complete' || true)
    if [ "$complete" -ge "$shards" ]; then
        break
    fi
    if docker service ps "$service" --format '{{.CurrentState}}' | grep -q '^Rejected'; then
        echo "run.sh: a shard was rejected:" >&2
        docker service ps --no-trunc "$service" >&2
        break
    fi
    sleep 1
done
"$here/gather.sh" "$service" "$dir"
docker service rm "$service" >/dev/null
