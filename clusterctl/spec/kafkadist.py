"""Apache Kafka binary distributions and the clusterctl/kafka image tag that follows their real version.

A distribution's version is read from its jars (libs/kafka-clients-<v>.jar, libs/kafka_2.13-<v>.jar), not from
its file name, and becomes the image tag: a 3.9.2 installation builds clusterctl/kafka:3.9.2. Kafka 4.x has
no ZooKeeper mode, so a ZooKeeper-mode spec refuses it in one line. The offline profile names the repository
only; the tag is the spec's kafka.version, else resolved here: the version of $CLUSTERCTL_KAFKA_DIST when set,
else the newest image built on this machine that the mode can run.
"""

from __future__ import annotations

import os
import re
import tarfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from clusterctl.env import KAFKA_DIST_ENV
from clusterctl.errors import NotFoundError, UsageError
from clusterctl.spec.capabilities import FIRST_VERSION_WITHOUT_ZOOKEEPER, no_zookeeper_mode, zookeeper_capable

OFFLINE_KAFKA_REPO = "clusterctl/kafka"
EXACT_VERSION = r"^\d+\.\d+\.\d+$"  # an exact Kafka release: kafka.version, init --kafka-version
UNBUILT_TAG = "unbuilt"  # the tag named when no image is built and no distribution is given
__all__ = ["FIRST_VERSION_WITHOUT_ZOOKEEPER", "zookeeper_capable"]  # what a version supports: spec/capabilities

_VERSION = r"(\d+\.\d+(?:\.\d+)?)"
_JAR_RES = (
    re.compile(rf"(?:^|/)libs/kafka-clients-{_VERSION}\.jar$"),
    re.compile(rf"(?:^|/)libs/kafka_\d+\.\d+-{_VERSION}\.jar$"),
)
_TOP_RE = re.compile(rf"^kafka_\d+\.\d+-{_VERSION}$")


def version_key(version: str) -> tuple[int, ...]:
    """'3.7.0' -> (3, 7, 0); anything else sorts first."""
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        return (-1,)


def offline_image(version: str) -> str:
    return f"{OFFLINE_KAFKA_REPO}:{version}"


def check_zookeeper_mode(version: str, source: str) -> str:
    """The version, or one UsageError line for a Kafka without ZooKeeper mode (4.x)."""
    if not zookeeper_capable(version):
        raise UsageError(
            no_zookeeper_mode(
                f"{source} is Kafka {version}",
                "set kafka.mode: kraft, or use Kafka 3.9.x (`clusterctl images build kafka --kafka-version 3.9.x`)",
            )
        )
    return version


def _version_from_names(names: list[str]) -> str | None:
    for pattern in _JAR_RES:
        for name in names:
            m = pattern.search(name)
            if m:
                return m.group(1)
    return None


@lru_cache(maxsize=8)
def _dist_version_cached(path: str, _mtime: float, _size: int) -> str:
    p = Path(path)
    if p.is_dir():
        names = [f"libs/{j.name}" for j in (p / "libs").glob("kafka*.jar")]
        found = _version_from_names(names)
        top = p.name
    else:
        names = []
        top = ""
        try:
            with tarfile.open(p, "r:*") as tar:
                for member in tar:
                    names.append(member.name)
                    if not top:
                        top = member.name.lstrip("./").split("/")[0]
                    found = _version_from_names(names[-1:])
                    if found:
                        return found
        except (tarfile.TarError, OSError, EOFError):
            raise UsageError(f"{path} is not a readable tar archive (expected a kafka_2.13-3.x.y.tgz)") from None
        found = None
    if found:
        return found
    m = _TOP_RE.match(top)
    if m:
        return m.group(1)
    raise UsageError(f"{path}: no libs/kafka-clients-<version>.jar, so its Kafka version is unknown")


def dist_version(dist: Path) -> str:
    """The Kafka version of a binary distribution (tarball or unpacked directory), from its jar names."""
    if not dist.exists():
        raise NotFoundError(f"Kafka distribution {dist} does not exist")
    st = dist.stat()
    return _dist_version_cached(str(dist.resolve()), st.st_mtime, st.st_size)


def env_dist() -> Path | None:
    value = os.environ.get(KAFKA_DIST_ENV)
    return Path(value) if value else None


def _local_engine() -> Any:
    """A client of the local Docker engine, or None when none answers (the spec layer asks, it never insists)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception:  # the SDK raises its own family, or requests' errors on odd sockets
        return None


def built_versions() -> list[str]:
    """Versions of the clusterctl/kafka images in the local engine, oldest first (empty when none or no engine)."""
    client = _local_engine()
    try:
        found = client.images.list(name=OFFLINE_KAFKA_REPO) if client is not None else []
    except Exception:  # the SDK raises its own family, or requests' errors on odd sockets
        return []
    tags = {t.split(":", 1)[1] for img in found for t in (img.tags or []) if t.startswith(OFFLINE_KAFKA_REPO + ":")}
    return sorted((t for t in tags if version_key(t) != (-1,)), key=version_key)


def local_image_exists(image: str) -> bool | None:
    """Whether the local engine has `image`; None when no Docker engine answers."""
    client = _local_engine()
    if client is None:
        return None
    try:
        client.images.get(image)
    except Exception:  # ImageNotFound, or an engine that stopped answering
        return False
    return True


def resolve_offline_image(kraft: bool = False) -> str:
    """The clusterctl/kafka image the offline profile runs when the spec names no kafka.version.

    The version of $CLUSTERCTL_KAFKA_DIST when it is set (a 4.x one is refused in ZooKeeper mode), else the
    newest clusterctl/kafka image built here that the mode can run (ZooKeeper mode: 3.x; KRaft: any), else
    clusterctl/kafka:unbuilt (which `up` reports as missing, with the build command).
    """
    dist = env_dist()
    if dist is not None and dist.exists():
        version = dist_version(dist)
        return offline_image(version if kraft else check_zookeeper_mode(version, f"{KAFKA_DIST_ENV}={dist}"))
    usable = [v for v in built_versions() if kraft or zookeeper_capable(v)]
    return offline_image(usable[-1] if usable else UNBUILT_TAG)
