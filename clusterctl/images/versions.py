"""The Kafka versions this machine has or can serve, and what each supports (`clusterctl versions`).

A row per version that is built (a clusterctl/kafka:<version> image in the local engine), assembled (an
installation from Maven Central under ~/.cache/clusterctl/kafka/: its image builds without network), or the
version a line clusterctl serves resolves to (3.9.x: ZooKeeper mode's last line and the default; 4.x: the newest).
`known=True` adds a row per release line the capability table knows. What a version supports comes from
spec/capabilities, the table spec validation and `migrate` ask too.

The inputs (built, assembled, resolved lines) are parameters, read from this machine when not given, so the
rows can be checked against any set of images, present or absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from clusterctl.images import kafka_maven
from clusterctl.spec import capabilities, kafkadist

SERVED_LINES = {kafka_maven.DEFAULT_KAFKA_VERSION: "default", kafka_maven.NEWEST_KAFKA_LINE: "newest"}


@dataclass
class VersionRow:
    """One Kafka version: where it stands on this machine and what it supports (statuses from spec/capabilities)."""

    version: str  # 3.9.2; a line (4.x, 3.7.x) when no exact version is known
    image: str
    built: bool
    assembled: bool  # its installation is here: `images build kafka --kafka-version V` needs no network
    served_as: list[str] = field(default_factory=list)  # "3.9.x (default)", "4.x (newest)"
    build: str | None = None  # the command that builds its image (None when built)
    zookeeper_mode: str = ""
    kraft: str = ""
    zk_migration: str = ""
    dynamic_quorum: str = ""
    elr: str = ""
    group_protocol: str = ""
    java: str = ""


def assembled_versions() -> list[str]:
    """Versions of the complete installations under kafka_maven.INSTALL_ROOT, oldest first."""
    root = kafka_maven.INSTALL_ROOT
    found = [p.name for p in root.iterdir() if kafka_maven.installed(p.name)] if root.is_dir() else []
    return sorted(found, key=kafkadist.version_key)


def resolved_lines() -> dict[str, str | None]:
    """What each served line last resolved to here (kafka_maven's record), None when never resolved."""
    record = kafka_maven.resolutions()
    out: dict[str, str | None] = {}
    for line in SERVED_LINES:
        entry = record.get(line)
        version = entry.get("version") if isinstance(entry, dict) else None
        out[line] = version if isinstance(version, str) else None
    return out


def _line_version(line: str) -> str:
    """A line's stand-in for the capability table: 3.9.x -> 3.9; a major (4.x) -> its newest known minor."""
    parts = [p for p in line.split(".") if p != "x"]
    if len(parts) >= 2:
        return ".".join(parts[:2])
    major = int(parts[0])
    return ".".join(map(str, max(ln for ln in capabilities.KNOWN_LINES if ln[0] == major)))


def list_versions(
    built: Iterable[str] | None = None,
    assembled: Iterable[str] | None = None,
    lines: Mapping[str, str | None] | None = None,
    known: bool = False,
) -> list[VersionRow]:
    """The rows, oldest first. `built`, `assembled`, `lines` (served line -> resolved version or None) default to
    what this machine has; `known` adds every release line of the capability table not already listed."""
    built_set = set(kafkadist.built_versions() if built is None else built)
    assembled_set = set(assembled_versions() if assembled is None else assembled)
    line_map = resolved_lines() if lines is None else dict(lines)
    served: dict[str, list[str]] = {}
    for line, resolved in line_map.items():
        served.setdefault(resolved or line, []).append(f"{line} ({SERVED_LINES.get(line, 'served')})")
    versions = built_set | assembled_set | set(served)
    if known:
        covered = {capabilities.line_of(_line_version(v)) for v in versions}
        versions |= {f"{a}.{b}.x" for a, b in capabilities.KNOWN_LINES if (a, b) not in covered}
    rows = []
    for v in sorted(versions, key=lambda v: tuple(int(p) if p.isdigit() else -1 for p in v.split("."))):
        exact = v.count(".") == 2 and v.replace(".", "").isdigit()
        is_built = v in built_set
        rows.append(
            VersionRow(
                version=v,
                image=kafkadist.offline_image(v) if exact else f"{kafkadist.OFFLINE_KAFKA_REPO}:<{v}>",
                built=is_built,
                assembled=v in assembled_set,
                served_as=served.get(v, []),
                build=None if is_built else f"clusterctl images build kafka --kafka-version {v}",
                **capabilities.capabilities(_line_version(v) if not exact else v),
            )
        )
    return rows
