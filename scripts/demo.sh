#!/usr/bin/env bash
# The main job (`make demo`): a fresh cluster end to end, then torn down again.
#   init → render → up (pulls first, then waits until healthy) → status → zk status/tree → topic create/describe →
#   produce → consume in a group → group lag → perf produce/consume → zk-node-loss drill → a broker drill
#   (kill-leader on real Kafka; short-pause on tansu), each with an HTML report → down --volumes
# The profile is `init`'s choice: CLUSTERCTL_PROFILE if set, else the registry profile (zookeeper:3.8, cp-kafka,
# CMAK) when a registry serves its images, else offline: Apache Kafka with CLUSTERCTL_KAFKA_DIST set (and the
# kafka image built by setup), otherwise tansu (Kafka protocol, one broker, RF 1). The first line says which, and why.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${CLUSTERCTL_VENV:-$REPO/.venv}"
CTL="$VENV/bin/clusterctl"
PY="$VENV/bin/python"
DIR="${CLUSTERCTL_DEMO_DIR:-$REPO/.demo}"
mkdir -p "$DIR"
cd "$DIR"

step() {
    printf '\n\033[1;36m$ clusterctl %s\033[0m\n' "$*" >&2
    "$CTL" "$@"
}
cleanup() { "$CTL" down --volumes >/dev/null 2>&1 || true; }
trap cleanup EXIT

started=$SECONDS
# init chooses the profile (probe or CLUSTERCTL_PROFILE); the demo then picks the engine for it
choice_err="$DIR/.choice.err"
if ! choice=$("$CTL" init demo --force --output "$DIR/.choice.yaml" --json 2>"$choice_err"); then
    cat "$choice_err" >&2
    exit 2
fi
read -r profile kengine reason < <("$PY" -c '
import json, os, sys
from clusterctl.spec.initfile import demo_engine
r = json.loads(sys.argv[1])
print(r["profile"], demo_engine(r["profile"], os.environ.get("CLUSTERCTL_KAFKA_DIST")), r["profile_reason"])
' "$choice")
rm -f "$DIR/.choice.yaml" "$choice_err"
printf 'demo: profile %s, engine %s: %s\n' "$profile" "$kengine" "$reason" >&2
engine=(--engine "$kengine")

step init demo --profile "$profile" --force "${engine[@]}"
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
