#!/bin/bash
# Image build step: record the broker's class archive (HotSpot AppCDS, -XX:ArchiveClassesAtExit). A one-node KRaft
# broker starts, serves a topic create, a produce and a group consume, and stops; the JVM writes the classes it
# loaded to $ARCHIVE as it exits. kafka-entrypoint maps the archive into every broker and controller it starts
# (-XX:SharedArchiveFile): the JVM skips reading, parsing and verifying those classes again, ~40% of a broker's
# start-up CPU on 2 cores. Same java, same jars and same launcher at build and at run time: it is valid here only.
set -euo pipefail
ARCHIVE="$1"
if ! compgen -G "${KAFKA_HOME:-/opt/kafka}/libs/kafka_2.*.jar" >/dev/null; then
    echo "record-class-archive: no Kafka jars in ${KAFKA_HOME:-/opt/kafka}/libs (a stub distribution): no archive"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/server.properties" <<P
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:29093
listeners=PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093
controller.listener.names=CONTROLLER
log.dirs=$work/data
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
P
export LOG_DIR="$work/logs" KAFKA_HEAP_OPTS="-Xms256m -Xmx512m"
# the lab's flags (spec kafka.defaults.jvm_opts); the archive serves Kafka's own G1 and C2 flags as well
export KAFKA_JVM_PERFORMANCE_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"
kafka-storage.sh format -t AAAAAAAAAAAAAAAAAAAAAA -c "$work/server.properties" >/dev/null
KAFKA_OPTS="-XX:ArchiveClassesAtExit=$ARCHIVE" kafka-server-start.sh "$work/server.properties" >"$work/server.out" 2>&1 &
pid=$!
for _ in $(seq 1 1800); do
    grep -q "Kafka Server started" "$work/server.out" && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work/server.out" >&2; exit 1; }
    sleep 0.1
done
grep -q "Kafka Server started" "$work/server.out" || { tail -20 "$work/server.out" >&2; exit 1; }
bootstrap=127.0.0.1:29092
kafka-topics.sh --bootstrap-server "$bootstrap" --create --topic class-archive --partitions 2 --replication-factor 1 >/dev/null
seq 1 2000 | kafka-console-producer.sh --bootstrap-server "$bootstrap" --topic class-archive >/dev/null
kafka-console-consumer.sh --bootstrap-server "$bootstrap" --topic class-archive --group class-archive \
    --from-beginning --max-messages 2000 >/dev/null 2>&1
kill -TERM "$pid"
wait "$pid" || true
[[ -s "$ARCHIVE" ]] || { echo "no class archive written" >&2; tail -20 "$work/server.out" >&2; exit 1; }
chmod 644 "$ARCHIVE"
