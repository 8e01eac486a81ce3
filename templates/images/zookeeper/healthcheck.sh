#!/bin/bash
# Healthy = the node serves requests (srvr reports a Mode), not merely that the JVM answers ruok.
port="${ZOO_CLIENT_PORT:-2181}"
reply="$(echo srvr | nc -w 2 127.0.0.1 "$port" 2>/dev/null)"
grep -q '^Mode: ' <<<"$reply"
