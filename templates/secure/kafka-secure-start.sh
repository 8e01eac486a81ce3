#!/bin/bash
# Rendered by `clusterctl render` (security.protocol is not PLAINTEXT): a secured Kafka node's entrypoint, run as
# root before the image's own. It copies this node's keystore and truststore from the read-only mount into
# /etc/kafka/secrets (which the image's entrypoint hands to the kafka user), reads the node's passwords from
# secret.env into the environment (never into the compose file), formats the log dir with the SCRAM users on first
# start (`kafka-storage format --add-scram`: KRaft keeps the credentials in its metadata from the first record; in
# ZooKeeper mode `kafka-configs --zookeeper` writes them into ZooKeeper before the broker needs them) and then runs
# the image's entrypoint, which writes server.properties from the KAFKA_* environment and starts Kafka.
set -euo pipefail
src=/run/clusterctl-secrets
if [[ "${1:-}" == "kafka-server" && "$(id -u)" == "0" ]]; then
    install -d -m 0700 /etc/kafka/secrets
    install -m 0600 "$src/keystore.p12" "$src/truststore.pem" /etc/kafka/secrets/
    # shellcheck source=/dev/null
    source "$src/secret.env"
    log_dirs="${KAFKA_LOG_DIRS:-/var/lib/kafka/data}"
    if [[ -z "${KAFKA_PROCESS_ROLES:-}" && ! -f "${log_dirs%%,*}/.clusterctl-scram" ]]; then
        echo "kafka-secure-start: adding the SCRAM users to ZooKeeper (first start)"
        for ((i = 0; i < ${#SCRAM_USERS[@]}; i += 2)); do
            KAFKA_HEAP_OPTS="-Xmx128m" kafka-configs.sh --zookeeper "$KAFKA_ZOOKEEPER_CONNECT" --alter \
                --entity-type users --entity-name "${SCRAM_USERS[i]}" --add-config "${SCRAM_USERS[i + 1]}" >/dev/null
        done
        mkdir -p "${log_dirs%%,*}" && touch "${log_dirs%%,*}/.clusterctl-scram"
    fi
    if [[ -n "${KAFKA_PROCESS_ROLES:-}" && ! -f "${log_dirs%%,*}/meta.properties" ]]; then
        echo "kafka-secure-start: formatting $log_dirs for cluster $CLUSTER_ID with the SCRAM users (first start)"
        props="$(mktemp)"
        exclude='^KAFKA_(VERSION|HOME|HEAP_OPTS|OPTS|LOG4J_OPTS|JMX_OPTS|JMX_PORT|JMX_HOSTNAME|JVM_PERFORMANCE_OPTS|GC_LOG_OPTS|LOG4J_ROOT_LOGLEVEL|LOG4J_LOGGERS|TOOLS_LOG4J_LOGLEVEL|DEBUG|CLUSTER_ID)='
        env | grep -E '^KAFKA_' | grep -vE "$exclude" | sort | while IFS='=' read -r name value; do
            key="${name#KAFKA_}"
            key="${key,,}"
            key="${key//___/-}"
            key="${key//__/@}"
            key="${key//_/.}"
            key="${key//@/_}"
            echo "$key=$value"
        done >"$props"
        KAFKA_HEAP_OPTS="-Xmx256m" kafka-storage.sh format --ignore-formatted -t "$CLUSTER_ID" -c "$props" \
            "${SCRAM_ARGS[@]}" >/dev/null
        rm -f "$props"
    fi
fi
exec /usr/local/bin/kafka-entrypoint "$@"
