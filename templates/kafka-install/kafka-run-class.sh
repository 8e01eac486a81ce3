#!/usr/bin/env bash
# clusterctl's launcher for an Apache Kafka installation assembled from Maven Central (libs/ holds the jars):
#   kafka-run-class.sh MAIN_CLASS [ARGS...]      or      kafka-run-class.sh PROGRAM.java [ARGS...]
# The environment Kafka's own scripts read is honoured: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS,
# KAFKA_LOG4J_OPTS, KAFKA_JMX_OPTS with JMX_PORT, LOG_DIR, JAVA_HOME, CLASSPATH.
set -euo pipefail
base_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $(basename "$0") MAIN_CLASS|PROGRAM.java [ARGS...]" >&2; exit 1; }

cp="$base_dir/libs/*"
[[ -n "${CLASSPATH:-}" ]] && cp="$cp:$CLASSPATH"

LOG_DIR="${LOG_DIR:-$base_dir/logs}"
mkdir -p "$LOG_DIR" 2>/dev/null || true

if [[ -z "${KAFKA_LOG4J_OPTS:-}" ]]; then
    # the server's configuration for kafka.Kafka and ZooKeeper, the tools' (WARN to stderr) for everything else
    case "$1" in
        kafka.Kafka | org.apache.zookeeper.server.quorum.QuorumPeerMain) which=log4j ;;
        *) which=tools-log4j ;;
    esac
    if [[ -f "$base_dir/config/$which.properties" ]]; then
        KAFKA_LOG4J_OPTS="-Dlog4j.configuration=file:$base_dir/config/$which.properties"
    else
        KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$base_dir/config/${which}2.properties"
    fi
fi

KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx256M}"
KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
KAFKA_JMX_OPTS="${KAFKA_JMX_OPTS:--Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false}"
jmx=()
[[ -n "${JMX_PORT:-}" ]] && jmx=($KAFKA_JMX_OPTS "-Dcom.sun.management.jmxremote.port=$JMX_PORT")

java="java"
[[ -n "${JAVA_HOME:-}" ]] && java="$JAVA_HOME/bin/java"

# shellcheck disable=SC2086  # the *_OPTS variables are word lists, as in Kafka's own scripts
exec "$java" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS "${jmx[@]}" $KAFKA_LOG4J_OPTS "-Dkafka.logs.dir=$LOG_DIR" \
    ${KAFKA_OPTS:-} -cp "$cp" "$@"
