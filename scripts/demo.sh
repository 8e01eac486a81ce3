#!/usr/bin/env bash
# The main job (`make demo`): a fresh offline cluster end to end, then torn down again.
#   init → render → up (waits until healthy) → status → zk status/tree → topic create/describe →
#   produce → consume in a group → group lag → perf produce/consume → zk-node-loss drill → a broker drill
#   (short-pause; kill-leader on real Kafka), each with an HTML report → down --volumes
# With CLUSTERCTL_KAFKA_DIST set (and the kafka image built by setup), the brokers are Apache Kafka;
# otherwise the broker is tansu (Kafka protocol, one broker, RF 1).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
CTL="$REPO/.venv/bin/clusterctl"
DIR="${CLUSTERCTL_DEMO_DIR:-$REPO/.demo}"
mkdir -p "$DIR"
cd "$DIR"

step() {
    printf '\n\033[1;36m$ clusterctl %s\033[0m\n' "$*" >&2
    "$CTL" "$@"
}
cleanup() { "$CTL" down --volumes >/dev/null 2>&1 || true; }
trap cleanup EXIT

engine=(--engine tansu)
if [[ -n "${CLUSTERCTL_KAFKA_DIST:-}" ]]; then
    engine=(--engine kafka)
fi

started=$SECONDS
step init demo --profile offline --force "${engine[@]}"
step render
step up --timeout 300
step status
step zk status
if [[ "${engine[1]}" == "kafka" ]]; then
    step zk tree /brokers --depth 3
    step zk get /controller
else
    step zk tree / --depth 2
fi
step topic create demo-events --partitions 3 --if-not-exists
step topic describe demo-events
printf '\n\033[1;36m$ seq 1 20 | awk ... | clusterctl produce demo-events -k :\033[0m\n' >&2
seq 1 20 | awk '{print "user-" $1 % 5 ":event " $1}' | "$CTL" produce demo-events -k :
step consume demo-events --from-beginning --max-messages 20 --timeout 15 --table --group demo-readers
step group describe demo-readers
step perf produce demo-perf --num-records 200000 --record-size 100 --partitions 3
step perf consume demo-perf --messages 200000
step scenario run zk-node-loss --report-dir "$DIR/reports/zk-node-loss"
if [[ "${engine[1]}" == "kafka" ]]; then
    step scenario run kill-leader --report-dir "$DIR/reports/kill-leader"
else
    step scenario run short-pause --report-dir "$DIR/reports/short-pause"
fi
step down --volumes
trap - EXIT
printf '\n\033[1mdemo finished in %ss\033[0m\n' "$((SECONDS - started))" >&2
