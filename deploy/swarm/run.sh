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
# Until every task completed, or one stopped: rejected (the image missing
# on a node), or failed, which under Swarm is loadcell-shard refusing its
# settings (it exits 0 once loadcell has run), and would be run again for
# ever. What there is is gathered either way, and the service removed.
status=0
while :; do
    states=$(docker service ps "$service" --filter desired-state=complete \
        --format '{{.CurrentState}}')
    complete=$(printf '%s\n' "$states" | grep -c '^Complete' || true)
    if [ "$complete" -ge "$shards" ]; then
        break
    fi
    stopped=$(docker service ps "$service" --no-trunc --format '{{.ID}} {{.CurrentState}} {{.Error}}' |
        grep -E '^[^ ]+ (Failed|Rejected) ' | head -n 1)
    if [ -n "$stopped" ]; then
        echo "run.sh: a shard stopped: ${stopped#* }" >&2
        docker service logs --raw "${stopped%% *}" 2>&1 >/dev/null | tail -n 5 >&2
        status=1
        break
    fi
    sleep 1
done
"$here/gather.sh" "$service" "$dir" || status=1
docker service rm "$service" >/dev/null
exit "$status"
