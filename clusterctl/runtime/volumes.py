"""Data volumes carry the profile and the image user they were made for; `up` refuses a mismatch.

Images write their data as different users: Confluent cp-kafka runs as appuser (uid 1000) and never changes
the owner of its data directory, wurstmeister/kafka runs as root, the official zookeeper image and our
offline images start as root, chown their data directories and then drop to their user. A volume filled by
one profile's broker is therefore not usable by another's (cp-kafka cannot write a root-owned log directory),
and the data layouts differ too. Docker volume labels are fixed at creation, so `up` creates the rendered
file's volumes itself, before `docker compose up`, with compose's own labels (compose then adopts them as its
own) plus ours; the compose template is left as it is. A volume without our labels (made before they
existed) is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from docker.errors import NotFound

from clusterctl.errors import UsageError
from clusterctl.runtime import compose, disks
from clusterctl.runtime import docker as dk
from clusterctl.spec import yamlfile
from clusterctl.spec.model import ClusterSpec

PROFILE_LABEL = "io.clusterctl.profile"
USER_LABEL = "io.clusterctl.image-user"
COMPOSE_VOLUME_LABEL = "com.docker.compose.volume"

# repository (without tag) -> the user the image's process writes its data as
IMAGE_USERS: dict[str, str] = {
    "confluentinc/cp-kafka": "appuser uid 1000",  # USER appuser; no chown of mounted data
    "confluentinc/cp-server": "appuser uid 1000",
    "confluentinc/cp-zookeeper": "appuser uid 1000",
    "wurstmeister/kafka": "root",  # start-kafka.sh runs as root
    "apache/kafka": "appuser",  # apache/kafka docker/jvm/Dockerfile: USER appuser; no chown of mounted data
    "zookeeper": "zookeeper uid 1000 (chowns at start)",  # docker-entrypoint.sh: chown, then gosu zookeeper
    "clusterctl/zookeeper": "zookeeper (chowns at start)",  # templates/images/zookeeper/entrypoint.sh: setpriv
    "clusterctl/kafka": "kafka (chowns at start)",  # templates/images/kafka/entrypoint.sh: setpriv
}


def image_user(image: str) -> str:
    """Who the image's process writes its data as ("image default" when we do not know the image)."""
    last = image.rsplit("/", 1)[-1]
    repo = image.rsplit(":", 1)[0] if ":" in last else image
    repo = repo.removeprefix("docker.io/").removeprefix("library/")
    return IMAGE_USERS.get(repo, "image default")


@dataclass
class VolumeClaim:
    """One named volume of the rendered file and what it should carry."""

    name: str  # the engine's name (<project>_<key>)
    key: str  # the compose file's key
    image: str  # the image of the service that mounts it
    profile: str
    user: str


def claims(spec: ClusterSpec, root: Any = None) -> list[VolumeClaim]:
    """Every named volume of the rendered compose file with the image that mounts it."""
    data = yamlfile.load_file(compose.require_compose_file(spec, root)) or {}
    declared: dict[str, Any] = data.get("volumes") or {}
    mounted: dict[str, str] = {}
    for svc in (data.get("services") or {}).values():
        for mount in svc.get("volumes") or []:
            source = mount.get("source") if isinstance(mount, dict) else str(mount).split(":", 1)[0]
            if source in declared:
                mounted.setdefault(source, str(svc.get("image")))
    out = []
    for key, conf in declared.items():
        image = mounted.get(key, "")
        name = (conf or {}).get("name") or f"{spec.topology.project}_{key}"
        out.append(VolumeClaim(name, key, image, spec.profile, image_user(image)))
    return out


def mismatch(claim: VolumeClaim, labels: dict[str, str]) -> str | None:
    """Why an existing volume does not fit the claim, or None (also for a volume without our labels)."""
    profile, user = labels.get(PROFILE_LABEL), labels.get(USER_LABEL)
    if profile is None and user is None:
        return None
    if profile == claim.profile and user == claim.user:
        return None
    return (
        f"volume {claim.name} holds data written for profile {profile} as {user}; this spec runs profile "
        f"{claim.profile} ({claim.image}) as {claim.user}"
    )


def check(spec: ClusterSpec, root: Any = None) -> list[VolumeClaim]:
    """Refuse existing volumes made for another profile or user (UsageError, exit 2); the claims whose volume
    does not exist yet (for `create`). Reads only: call it before pulling or starting anything."""
    todo: list[VolumeClaim] = []
    for claim in claims(spec, root):
        try:
            attrs = dk.client().volumes.get(claim.name).attrs
        except NotFound:
            todo.append(claim)
            continue
        labels = dict(attrs.get("Labels") or {})
        why = mismatch(claim, labels) or _storage_mismatch(spec, claim, attrs.get("Options") or {}, root)
        if why is not None:
            raise UsageError(why, hint="remove the old data with `clusterctl down --volumes`, then `clusterctl up`")
    return todo


def _storage_mismatch(spec: ClusterSpec, claim: VolumeClaim, options: dict[str, str], root: Any) -> str | None:
    """Why an existing volume is not where `storage.bounded_mb` puts it (a bounded image, or the host's disk)."""
    want = disks.volume_options(spec, claim.name, root).get("device")
    if options.get("device") == want:
        return None
    return f"volume {claim.name} keeps its data on {_where(options.get('device'))}; this spec puts it on {_where(want)}"


def _where(device: str | None) -> str:
    return f"the bounded image mounted at {device}" if device else "the host's disk"


def create(spec: ClusterSpec, todo: list[VolumeClaim], root: Any = None) -> list[str]:
    """Create the volumes `check` found missing, with compose's labels and ours (with `storage.bounded_mb`, as
    binds of their mounted images); their names."""
    for claim in todo:
        opts = disks.volume_options(spec, claim.name, root)
        dk.client().volumes.create(
            name=claim.name, driver="local", driver_opts=opts or None, labels=volume_labels(spec, claim)
        )
    return [c.name for c in todo]


def volume_labels(spec: ClusterSpec, claim: VolumeClaim) -> dict[str, str]:
    """Compose's labels (so compose adopts the volume as its own), the template's and ours."""
    return {
        dk.PROJECT_LABEL: spec.topology.project,
        COMPOSE_VOLUME_LABEL: claim.key,
        "io.clusterctl.cluster": spec.name,
        PROFILE_LABEL: claim.profile,
        USER_LABEL: claim.user,
    }
