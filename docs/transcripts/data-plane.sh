#!/usr/bin/env bash
# Regenerates docs/transcripts/data-plane.txt: the data-plane commands against tansu on loopback.
#   bash docs/transcripts/data-plane.sh > docs/transcripts/data-plane.txt
# create → describe → produce 1000 keyed lines → consume from the beginning → group lag, up and back to 0
# → reset dry-run vs execute → one-line errors with their exit codes.
set -uo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
export PATH="$REPO/.venv/bin:$PATH" COLUMNS=100
PORT=39092
B=(-b "127.0.0.1:$PORT")
TANSU="$(python -c 'from clusterctl.testing.tansu import tansu_binary; print(tansu_binary())')"
"$TANSU" broker --cluster-id tansu_cluster --listener-url "tcp://127.0.0.1:$PORT" \
    --advertised-listener-url "tcp://127.0.0.1:$PORT" --storage-engine memory://tansu/ >/tmp/transcript-tansu.log 2>&1 &
TANSU_PID=$!
trap 'kill $TANSU_PID 2>/dev/null' EXIT
python -c "from clusterctl.testing.tansu import wait_for_port; wait_for_port('127.0.0.1', $PORT, 15)"

run() {  # show the command, run it, show a non-zero exit code
    printf '\n$ %s\n' "$1"
    bash -c "$1" 2>&1
    local rc=$?
    [[ $rc == 0 ]] || echo "exit $rc"
}

echo "# data-plane transcript: tansu (Kafka-protocol broker) on loopback at 127.0.0.1:$PORT, $(date -u +%Y-%m-%dT%H:%MZ)"
run "clusterctl cluster describe ${B[*]}"
run "clusterctl topic create orders -p 3 -r 1 ${B[*]}"
run "clusterctl topic describe orders ${B[*]}"
run "seq 1 1000 | awk '{print \"user\" (\$1 % 10) \":order-\" \$1}' | clusterctl produce orders --key-separator : ${B[*]}"
run "clusterctl consume orders --from-beginning --timeout 3 ${B[*]} > /tmp/orders.txt; head -5 /tmp/orders.txt; wc -l < /tmp/orders.txt"
echo "# order within a partition holds: user1's orders on their partition, offsets rising with the order number"
run "grep 'key=user1 ' /tmp/orders.txt | head -4"
run "clusterctl consume orders --group billing --timeout 3 ${B[*]} > /dev/null"
run "clusterctl group describe billing ${B[*]}"
run "seq 1001 1500 | awk '{print \"user\" (\$1 % 10) \":order-\" \$1}' | clusterctl produce orders --key-separator : ${B[*]} > /dev/null"
echo "# 500 new orders: the group lags by 500"
run "clusterctl group describe billing ${B[*]}"
run "clusterctl consume orders --group billing --timeout 3 ${B[*]} > /dev/null"
echo "# consumed: lag back to 0"
run "clusterctl group describe billing --json ${B[*]} | python -c 'import json,sys; d=json.load(sys.stdin); print(d[\"total_lag\"], d[\"uncommitted_partitions\"])'"
run "clusterctl group reset billing --topic orders --to-earliest ${B[*]}"
run "clusterctl group reset billing --topic orders --to-earliest --execute ${B[*]}"
run "clusterctl group describe billing ${B[*]}"
run "clusterctl topic create orders ${B[*]}"
run "clusterctl topic create wide -r 3 ${B[*]}"
run "clusterctl topic describe nope ${B[*]}"
run "clusterctl topic list -b 127.0.0.1:1"
run "clusterctl topic alter orders --partitions 6 ${B[*]}   # tansu has no CreatePartitions"
run "clusterctl topic delete orders --yes ${B[*]}"
