#!/usr/bin/env bash
# The main job (`make demo`): a fresh cluster of real Apache Kafka end to end, then torn down again.
#   init → render → up (waits until healthy) → status → zk status/tree/get /controller → topic create/describe
#   (RF 3: leaders, ISR) → produce → consume in a group → group lag → perf produce beside Kafka's own
#   ProducerPerformance (bench/produce_side_by_side.py) → perf consume → zk-node-loss and kill-leader drills, each
#   with an HTML report → down --volumes, and the wall time of every phase.
# The cluster is `init`'s default: 3 ZooKeeper nodes + 3 Kafka brokers (ZooKeeper mode) + the console. The profile
# is init's choice too: CLUSTERCTL_PROFILE if set, else the registry profile (zookeeper:3.8, cp-kafka, CMAK) when a
# registry serves its images, else offline: the images built here by `make setup`, Apache Kafka 3.9.x assembled
# from Kafka's Maven Central artifacts. The first lines say which Kafka, mode and profile, and why.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${CLUSTERCTL_VENV:-$REPO/.venv}"
CTL="$VENV/bin/clusterctl"
PY="$VENV/bin/python"
DIR="${CLUSTERCTL_DEMO_DIR:-$REPO/.demo}"
mkdir -p "$DIR"
cd "$DIR"

say() { printf '\n\033[1;36m$ %s\033[0m\n' "$*" >&2; }
step() {
    say "clusterctl $*"
    "$CTL" "$@"
}
cleanup() { "$CTL" down --volumes >/dev/null 2>&1 || true; }
trap cleanup EXIT

# phase timing: `phase NAME` ends the running phase and starts NAME; `phase` alone ends the last one
phases=()
secs=()
phase_name=""
phase_t0=""
phase() {
    local now=$EPOCHREALTIME
    if [[ -n "$phase_name" ]]; then
        phases+=("$phase_name")
        secs+=("$(awk -v a="$phase_t0" -v b="$now" 'BEGIN { printf "%.1f", b - a }')")
    fi
    phase_name="${1:-}"
    phase_t0=$now
}
started=$EPOCHREALTIME

phase "init (profile probe, spec)"
say "clusterctl init demo --force"
init_err="$DIR/.init.err"
if ! choice=$("$CTL" init demo --force --json 2>"$init_err"); then
    cat "$init_err" >&2
    exit 2
fi
rm -f "$init_err"
# what runs, from init's own answer: the spec it wrote and its notes
"$PY" - "$choice" >&2 <<'EOF'
import json, os, sys
from clusterctl.spec.model import load_spec
from clusterctl.spec.profiles import kafka_version_of
r = json.loads(sys.argv[1])
spec = load_spec(r["path"])
image = spec.broker_image
if r["profile"] == "offline" and spec.kafka.engine == "kafka":
    source = "CLUSTERCTL_KAFKA_DIST" if os.environ.get("CLUSTERCTL_KAFKA_DIST") else "Maven Central"
    kafka = f"Apache Kafka {image.rpartition(':')[2]} (from {source}, image {image})"
else:
    v = kafka_version_of(image)
    kafka = (f"Apache Kafka {v[0]}.{v[1]}" if v else spec.kafka.engine) + f" (image {image})"
ensemble = "no ZooKeeper" if spec.kraft_mode else f"{spec.zookeeper.nodes} ZooKeeper nodes"
manager = {"console": "clusterctl's console", "cmak": "CMAK"}.get(spec.manager_kind, spec.manager_kind)
manager = manager if spec.kafka_manager.enabled else "no manager"
print(f"demo: {kafka}, mode {spec.kafka.mode}, profile {r['profile']}")
print(f"demo: {ensemble} + {spec.kafka.brokers} brokers + {manager} (engine {spec.kafka.engine})")
for note in r.get("notes", []):
    print(f"demo: {note}")
EOF

phase "render"
step render

phase "up (until healthy)"
step up --timeout 300

phase "status, ZooKeeper"
step status
step zk status
step zk tree /brokers --depth 3
step zk get /controller

phase "topic (RF 3)"
step topic create demo-events --partitions 3 --replication-factor 3 --if-not-exists
step topic describe demo-events

phase "produce / consume"
say "seq 1 20 | awk ... | clusterctl produce demo-events -k :"
seq 1 20 | awk '{print "user-" $1 % 5 ":event " $1}' | "$CTL" produce demo-events -k :
step consume demo-events --from-beginning --max-messages 20 --timeout 15 --table --group demo-readers
step group describe demo-readers

phase "perf produce vs Java"
say "python bench/produce_side_by_side.py --topic demo-perf -n 200000 --record-size 100 --partitions 3"
"$PY" "$REPO/bench/produce_side_by_side.py" --topic demo-perf -n 200000 --record-size 100 --partitions 3

phase "perf consume"
step perf consume demo-perf --messages 200000

phase "zk-node-loss drill"
step scenario run zk-node-loss --report-dir "$DIR/reports/zk-node-loss"

phase "kill-leader drill"
step scenario run kill-leader --report-dir "$DIR/reports/kill-leader"
"$PY" - "$DIR/reports/kill-leader" >&2 <<'EOF'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
r = json.loads((d / "report.json").read_text())
v = r.get("verify") or {}
print(f"\nkill-leader verdict: {r.get('verdict') or ('PASS' if r.get('ok') else 'FAIL')}: "
      f"{v.get('acked', '?')} writes acknowledged (acks=all), {v.get('lost_count', '?')} lost, "
      f"{v.get('duplicated_count', '?')} duplicated; report {r.get('report_html') or d / 'report.html'}")
EOF

phase "down --volumes"
step down --volumes
trap - EXIT
phase

printf '\n\033[1m%-28s %8s\033[0m\n' "phase" "seconds" >&2
for i in "${!phases[@]}"; do
    printf '%-28s %8s\n' "${phases[$i]}" "${secs[$i]}" >&2
done
total=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
printf '\033[1m%-28s %8s\033[0m\n' "total" "$total" >&2
printf '\n\033[1mdemo finished in %ss\033[0m\n' "$total" >&2
