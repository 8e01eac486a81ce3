"""Formatting a dynamic quorum's controllers (kraft.quorum: dynamic, KIP-853), and the controller whose disk is gone.

A dynamic quorum's controllers cannot format themselves at first start the way the image's entrypoint formats a
static one: Kafka needs `--initial-controllers` (the first voters, with their directory ids) on a fresh cluster and
`--no-initial-controllers` on a controller joining a running one, and only clusterctl knows which case it is. So the
data volume of each controller is formatted here, before its container first starts, by Kafka's own
`kafka-storage.sh format` in a throwaway container of the cluster's image (a JVM for about a second); the
entrypoint then finds `meta.properties` and leaves the directory alone (it chowns it to the kafka user at start).

- `up` creating every controller's volume: a fresh cluster, each formatted with `--initial-controllers`.
- `up` creating only some of them (a volume was removed): those with `--no-initial-controllers` (an observer
  until `clusterctl quorum add-controller` makes it a voter). Formatting one with `--initial-controllers` again
  would bring back a voter with the old directory id and an empty log: one that may vote for a leader missing
  committed records, the failure dynamic quorums exist to avoid.
- `wipe` (the chaos fault wipe-controller): SIGKILL a controller, remove its container and data volume.
- `provision` (`chaos heal` after a wipe): a fresh volume formatted with `--no-initial-controllers`, the
  container started by compose.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from docker.errors import APIError, ContainerError, NotFound

from clusterctl.compose.contracts import derive
from clusterctl.compose.render import existing_cluster_id
from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.runtime import compose, volumes
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec

INITIAL = "--initial-controllers"
JOINING = "--no-initial-controllers"
FORMAT_TIMEOUT_S = 120
_SCRIPT = """set -e
printf '%s\\n' "$SERVER_PROPERTIES" >/tmp/format.properties
kafka-storage.sh format --cluster-id "$CLUSTER_ID" --config /tmp/format.properties "$@" >&2
cat "$DATA_DIR/meta.properties"
"""


@dataclass
class Formatted:
    """One controller's log dir as `kafka-storage format` left it."""

    service: str
    node_id: int
    flag: str  # --initial-controllers | --no-initial-controllers
    directory_id: str
    seconds: float


def dynamic(spec: ClusterSpec) -> bool:
    return spec.kraft_mode and spec.kraft.quorum == "dynamic"


def refuse_static(spec: ClusterSpec, what: str) -> None:
    """The one line for a voter change on a quorum whose voters were fixed at format time (exit 2)."""
    if not spec.kraft_mode:
        raise UsageError(f"{what}: cluster {spec.name} runs ZooKeeper mode (no controller quorum)")
    if not dynamic(spec):
        raise UsageError(
            f"{what} changes the controller quorum's voters, which needs a dynamic quorum (kraft.quorum: dynamic, "
            f"KIP-853); cluster {spec.name} runs a static one (controller.quorum.voters, fixed at format time)"
        )


def _claim(spec: ClusterSpec, node_id: int, root: Path | None) -> volumes.VolumeClaim:
    key = f"{spec.topology.controller_service(node_id)}-data"
    found = [c for c in volumes.claims(spec, root) if c.key == key]
    if not found:
        raise NotFoundError(f"the rendered compose file has no volume {key}", hint="clusterctl render")
    return found[0]


def format_voter(spec: ClusterSpec, node_id: int, flag: str, root: Path | None = None) -> Formatted:
    """`kafka-storage format` of controller `node_id`'s (empty) data volume, with the configuration its container
    will run with (derived from the rendered compose file as the image's entrypoint derives it)."""
    service = spec.topology.controller_service(node_id)
    compose_file = compose.require_compose_file(spec, root)
    cluster_id = existing_cluster_id(compose_file.parent)
    if cluster_id is None:
        raise NotFoundError(f"no KRaft cluster id in {compose_file.parent}/.env", hint="clusterctl render")
    node = next((n for n in derive(compose_file.read_text(encoding="utf-8")) if n.service == service), None)
    if node is None:
        raise NotFoundError(f"{service} is not in {compose_file}", hint="clusterctl render")
    args = [flag, spec.topology.initial_controllers] if flag == INITIAL else [flag]
    data_dir = spec.image_profile.kafka_data_dir
    t0 = time.monotonic()
    try:
        out = dk.client().containers.run(
            spec.broker_image,
            args,
            entrypoint=["bash", "-c", _SCRIPT, "format"],
            environment={
                "SERVER_PROPERTIES": node.text,
                "CLUSTER_ID": cluster_id,
                "DATA_DIR": data_dir,
                "KAFKA_HEAP_OPTS": "-Xmx256m",
            },
            volumes={_claim(spec, node_id, root).name: {"bind": spec.image_profile.kafka_volume_mount, "mode": "rw"}},
            network_mode="none",
            remove=True,
            stdout=True,
            stderr=False,
        )
    except ContainerError as exc:
        last = [ln for ln in (exc.stderr or b"").decode("utf-8", "replace").splitlines() if ln.strip()]
        raise ClusterctlError(f"formatting {service} failed: {(last or ['(no output)'])[-1][:300]}") from None
    except APIError as exc:
        raise ClusterctlError(f"formatting {service} failed: {exc.explanation or exc}") from None
    found = re.search(r"^directory\.id=(\S+)$", out.decode("utf-8", "replace"), re.MULTILINE)
    if found is None:
        raise ClusterctlError(f"formatting {service}: meta.properties names no directory.id")
    return Formatted(service, node_id, flag, found.group(1), round(time.monotonic() - t0, 2))


def format_new_voters(spec: ClusterSpec, created: list[str], root: Path | None = None) -> list[Formatted]:
    """Format the controllers whose data volumes `up` has just created (`created`: volume names): all of them with
    `--initial-controllers` when every voter's volume is new, else each new one with `--no-initial-controllers`."""
    if not dynamic(spec):
        return []
    new = [n for n in spec.topology.controller_ids if _claim(spec, n, root).name in created]
    flag = INITIAL if len(new) == len(spec.topology.controller_ids) else JOINING
    return [format_voter(spec, n, flag, root) for n in new]


@dataclass
class Wiped:
    service: str
    container: str
    volume: str
    directory_id: str | None  # the id the quorum knew it by (None: the quorum did not answer)
    started: float
    took_s: float


def wipe(spec: ClusterSpec, node_id: int, directory_id: str | None, root: Path | None = None) -> Wiped:
    """SIGKILL controller `node_id`, then remove its container and its data volume (the disk is gone)."""
    refuse_static(spec, "wipe-controller")
    if spec.storage.bounded_mb is not None:
        raise UsageError(
            "wipe-controller removes a controller's Docker volume; with storage.bounded_mb its data lives on a "
            "mounted image and would stay: set storage.bounded_mb: null"
        )
    service = spec.topology.controller_service(node_id)
    name = spec.topology.controller_container(node_id)
    volume = _claim(spec, node_id, root).name
    container = dk.get_container(name)
    started = time.time()
    t0 = time.monotonic()
    try:
        if container.status in ("running", "paused", "restarting"):
            dk.kill(container)
        container.remove(force=True)
        dk.client().volumes.get(volume).remove(force=True)
    except NotFound:
        pass
    except APIError as exc:
        raise ClusterctlError(f"wipe-controller {service}: {exc.explanation or exc}") from None
    return Wiped(service, name, volume, directory_id, started, round(time.monotonic() - t0, 3))


def provision(spec: ClusterSpec, node_id: int, root: Path | None = None) -> Formatted | None:
    """Start controller `node_id` again after its container was removed: on a fresh volume formatted with
    `--no-initial-controllers` when its volume is gone too (the Formatted), else on the volume it had (None)."""
    refuse_static(spec, "replacing a controller")
    todo = [c for c in volumes.check(spec, root) if c.key == _claim(spec, node_id, root).key]
    volumes.create(spec, todo, root)
    formatted = format_voter(spec, node_id, JOINING, root) if todo else None
    compose.run(spec, "up", "-d", "--no-deps", "--pull", "never", spec.topology.controller_service(node_id), root=root)
    return formatted
