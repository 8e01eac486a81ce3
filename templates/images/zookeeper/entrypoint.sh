#!/bin/bash
# Entrypoint following the official `zookeeper` image's contract:
#   ZOO_MY_ID, ZOO_SERVERS ("server.1=zk1:2888:3888;2181 server.2=..."), ZOO_TICK_TIME, ZOO_INIT_LIMIT,
#   ZOO_SYNC_LIMIT, ZOO_MAX_CLIENT_CNXNS, ZOO_STANDALONE_ENABLED, ZOO_ADMINSERVER_ENABLED,
#   ZOO_AUTOPURGE_PURGEINTERVAL, ZOO_AUTOPURGE_SNAPRETAINCOUNT, ZOO_4LW_COMMANDS_WHITELIST, ZOO_CFG_EXTRA,
#   JVMFLAGS. A /conf/zoo.cfg that already exists (e.g. mounted) is used as is.
set -euo pipefail

if [[ "$1" == "zkServer" || "$1" == "zkServer.sh" ]]; then
    if [[ "$(id -u)" == "0" ]]; then
        chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR" 2>/dev/null || true
        [[ -w "$ZOO_CONF_DIR" ]] && chown zookeeper:zookeeper "$ZOO_CONF_DIR" 2>/dev/null || true
        exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
    fi

    cfg="$ZOO_CONF_DIR/zoo.cfg"
    if [[ ! -f "$cfg" ]]; then
        {
            echo "dataDir=$ZOO_DATA_DIR"
            echo "dataLogDir=$ZOO_DATA_LOG_DIR"
            echo "tickTime=${ZOO_TICK_TIME:-2000}"
            echo "initLimit=${ZOO_INIT_LIMIT:-5}"
            echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
            echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
            echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-1}"
            echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
            echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
            echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-false}"
            echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr,mntr,ruok,stat,conf,isro,envi,cons}"
            for extra in ${ZOO_CFG_EXTRA:-}; do
                echo "$extra"
            done
            if [[ -z "${ZOO_SERVERS:-}" ]]; then
                echo "server.${ZOO_MY_ID:-1}=localhost:2888:3888;2181"
            else
                for server in $ZOO_SERVERS; do
                    echo "$server"
                done
            fi
        } >"$cfg"
    fi
    if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
        echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
    fi

    cp="$ZOO_CONF_DIR:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
    # shellcheck disable=SC2086  # JVMFLAGS is a list of flags
    exec java -cp "$cp" \
        -Dzookeeper.log.dir="$ZOO_LOG_DIR" -Dzookeeper.root.logger=INFO,CONSOLE \
        -Dlog4j.configuration=file:/etc/clusterctl/zk-log4j.properties \
        ${JVMFLAGS:--Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
fi

exec "$@"
