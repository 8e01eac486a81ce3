#!/bin/bash
# clusterctl/console entrypoint: relay the brokers' advertised loopback addresses, then exec the console.
#
# KAFKA_LOOPBACK_RELAY="127.0.0.1:9092=kafka1:9092 ...": tansu advertises only its host-published address;
# each pair relays that loopback address inside this container to the broker on the cluster network.
set -euo pipefail
for pair in ${KAFKA_LOOPBACK_RELAY:-}; do
  listen=${pair%%=*}
  target=${pair#*=}
  socat "TCP4-LISTEN:${listen##*:},bind=${listen%:*},fork,reuseaddr" "TCP4:${target}" &
done
exec "$@"
