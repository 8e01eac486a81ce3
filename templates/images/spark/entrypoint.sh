#!/bin/bash
# clusterctl/spark entrypoint: set up what executors need, then exec the Spark master or worker.
#
# KAFKA_LOOPBACK_RELAY="127.0.0.1:9092=kafka1:9092 ...": the brokers advertise their host-published
# address (tansu has no other listener); each pair relays that loopback address inside this container to
# the broker on the cluster network, so the driver's bootstrap list works unchanged in executors.
# CLUSTERCTL_SHARED_DIR: the host directory mounted at the same path (checkpoints); executors and the
# driver on the host may run as different users, so it is made writable for both.
set -euo pipefail
for pair in ${KAFKA_LOOPBACK_RELAY:-}; do
  listen=${pair%%=*}
  target=${pair#*=}
  socat "TCP4-LISTEN:${listen##*:},bind=${listen%:*},fork,reuseaddr" "TCP4:${target}" &
done
if [[ -n ${CLUSTERCTL_SHARED_DIR:-} && -d ${CLUSTERCTL_SHARED_DIR} ]]; then
  chmod 0777 "$CLUSTERCTL_SHARED_DIR"
fi
umask 0000
exec "$@"
