"""`clusterctl init`: choose sensible values, validate them, write a commented spec file atomically."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl import TEMPLATES_DIR
from clusterctl.errors import SpecError, UsageError
from clusterctl.spec import kafkadist, validate, yamlfile
from clusterctl.spec.capabilities import no_zookeeper_mode
from clusterctl.spec.model import ClusterSpec, parse_spec
from clusterctl.spec.profiles import OFFLINE_KAFKA_IMAGE, PROFILES, apache_image, check_apache_version
from clusterctl.templating import text_environment

SPEC_TEMPLATE = "clusterctl.yaml.j2"
PROFILE_ENV = "CLUSTERCTL_PROFILE"
REGISTRY_PROFILE = "default"
FALLBACK_PROFILE = "offline"


@dataclass
class InitResult:
    path: str
    profile: str
    engine: str
    notes: list[str] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)
    profile_reason: str | None = None  # why this profile, when init chose it


@dataclass
class ProfileChoice:
    profile: str
    reason: str


# probe(image) -> (a registry serves it, what the engine said)
RegistryProbe = Callable[[str], tuple[bool, str]]


def choose_profile(env_profile: str | None, probe: RegistryProbe) -> ProfileChoice:
    """The profile when none is asked for: $CLUSTERCTL_PROFILE if set, else the registry profile when a registry
    serves its first image (a fast manifest probe), else the offline profile."""
    if env_profile:
        if env_profile not in PROFILES:
            raise UsageError(f"{PROFILE_ENV} must be one of {', '.join(PROFILES)}, got {env_profile!r}")
        return ProfileChoice(env_profile, f"{PROFILE_ENV}={env_profile}")
    image = PROFILES[REGISTRY_PROFILE].zookeeper
    ok, said = probe(image)
    if ok:
        return ProfileChoice(REGISTRY_PROFILE, f"a registry serves {image}: published images can be pulled")
    return ProfileChoice(FALLBACK_PROFILE, f"no registry serves {image} ({said}): images built here, no pull")


def _yaml_scalar(value: Any) -> str:
    """A YAML flow value (JSON is valid YAML)."""
    return json.dumps(value)


def choose_kafka_version(
    profile: str, engine: str, mode: str, requested: str | None, built: list[str]
) -> tuple[str | None, list[str]]:
    """kafka.version for the offline profile: the one asked for, else the newest built image the mode runs.

    `built` is the clusterctl/kafka versions this machine has (kafkadist.built_versions()); None when none fits,
    and the note says how to build it.
    """
    if profile == "apache" and engine == "kafka" and requested is not None:
        if not re.fullmatch(kafkadist.EXACT_VERSION, requested):
            raise UsageError(f"--kafka-version must be an exact version such as 4.4.0, got {requested!r}")
        try:
            check_apache_version(requested)
        except ValueError as exc:
            raise UsageError(str(exc).replace("kafka.version", "--kafka-version", 1)) from None
        return requested, [f"Kafka {requested}: {apache_image(requested)} (pulled by `up`)"]
    if profile != FALLBACK_PROFILE or engine != "kafka":
        if requested is not None:
            raise UsageError(
                f"--kafka-version picks the offline or apache profile's Kafka image; profile {profile}, engine {engine}"
            )
        return None, []
    if requested is not None:
        if not re.fullmatch(kafkadist.EXACT_VERSION, requested):
            raise UsageError(f"--kafka-version must be an exact version such as 3.9.2, got {requested!r}")
        if not kafkadist.zookeeper_capable(requested) and mode != "kraft":
            raise UsageError(
                no_zookeeper_mode(
                    f"--kafka-version {requested} is Kafka {requested.rsplit('.', 1)[0]}", "add --mode kraft"
                )
            )
        return requested, []
    usable = [v for v in built if mode == "kraft" or kafkadist.zookeeper_capable(v)]
    if usable:
        return usable[-1], [f"Kafka {usable[-1]}: the newest {OFFLINE_KAFKA_IMAGE} image built here for {mode} mode"]
    return None, [
        f"no {OFFLINE_KAFKA_IMAGE} image is built yet: `clusterctl images build kafka` (make setup does) builds the "
        "newest Kafka 3.9.x from Maven Central; `--kafka-version 4.x` the newest 4.x (KRaft)"
    ]


def build_spec_data(
    name: str,
    profile: str,
    engine: str,
    brokers: int | None,
    zk_nodes: int | None,
    subnet: str | None,
    mode: str = "zookeeper",
    kafka_version: str | None = None,
) -> dict[str, Any]:
    """The spec as a mapping, with defaults sized to the broker count."""
    n = brokers if brokers is not None else (1 if engine == "tansu" else 3)
    rf = min(3, n)
    data: dict[str, Any] = {
        "name": name,
        "profile": profile,
        "kafka": {
            "engine": engine,
            "mode": mode,
            "version": kafka_version,
            "brokers": n,
            "defaults": {"replication_factor": rf, "min_insync_replicas": max(1, rf - 1)},
        },
        "kafka_manager": {
            "enabled": PROFILES[profile].manager_kind == "console"
            or (engine == "kafka" and PROFILES[profile].kafka_manager is not None)
        },
    }
    if engine == "tansu":
        data["kafka"]["jmx_port"] = None
    if zk_nodes is not None:
        data["zookeeper"] = {"nodes": zk_nodes}
    if subnet is not None:
        data["network"] = {"subnet": subnet}
    return data


def render_spec_text(spec: ClusterSpec, notes: list[str], templates_dir: Path | None = None) -> str:
    env = text_environment(templates_dir or TEMPLATES_DIR, {"y": _yaml_scalar})
    return env.get_template(SPEC_TEMPLATE).render(s=spec, d=spec.kafka.defaults, notes=notes)


def _remove_dirs(dirs: list[Path]) -> None:
    """Remove directories this call created (innermost first), if still empty."""
    for d in dirs:
        with contextlib.suppress(OSError):
            d.rmdir()


def init_spec(
    path: Path,
    name: str = "kafka-lab",
    profile: str = "default",
    engine: str | None = None,
    brokers: int | None = None,
    zk_nodes: int | None = None,
    subnet: str | None = None,
    force: bool = False,
    profile_reason: str | None = None,
    mode: str | None = None,
    kafka_version: str | None = None,
) -> InitResult:
    """Validate the chosen values, render the commented spec, check it parses back identically, write it.

    `mode` defaults to zookeeper, or kraft for a profile whose image has no ZooKeeper mode (apache)."""
    if profile not in PROFILES:
        raise UsageError(f"--profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if mode is None:
        mode = "kraft" if PROFILES[profile].broker_flavor == "apache" else "zookeeper"
    validate.can_look_at(path)
    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="pass --force to overwrite it")
    if path.exists() and not path.is_file():
        raise UsageError(f"{path} exists and is not a file")
    if mode not in ("zookeeper", "kraft"):
        raise UsageError(f"--mode must be zookeeper or kraft, got {mode!r}")
    chosen = engine or "kafka"  # tansu only when asked for: a one-broker quick mode
    if mode == "kraft" and zk_nodes is not None:
        raise UsageError("--zk-nodes is for ZooKeeper mode; --mode kraft runs a controller quorum")
    built = kafkadist.built_versions() if profile == FALLBACK_PROFILE and chosen == "kafka" else []
    version, notes = choose_kafka_version(profile, chosen, mode, kafka_version, built)
    if profile_reason:
        notes = [f"profile {profile}: {profile_reason}", *notes]
    data = build_spec_data(name, profile, chosen, brokers, zk_nodes, subnet, mode, version)
    spec = parse_spec(data, source="init")
    text = render_spec_text(spec, notes)
    if parse_spec(yamlfile.load_text(text, "init"), source="init") != spec:  # the comments template must not drift
        raise SpecError("init: the commented spec does not round-trip (template out of date)")
    created = [p for p in path.parents if not p.exists()]  # innermost first
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        _remove_dirs(created)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _remove_dirs(created)
        if isinstance(exc, OSError):
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    return InitResult(
        path=str(path), profile=profile, engine=chosen, notes=notes, spec=spec.model_dump(mode="json"),
        profile_reason=profile_reason,
    )  # fmt: skip
