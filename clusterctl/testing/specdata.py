"""The spec a throwaway test cluster runs: the caller's spec (file, dict or model) with its open choices made.

The profile follows the images present here (offline when ours are built), the engine is Apache Kafka unless
tansu is asked for; broker count and replication settings are made to fit
the engine; with isolation, the name, subnet and host ports are fresh ones (runtime/allocate.py), so
parallel sessions do not clash.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any, Literal

import yaml

from clusterctl.errors import ClusterctlError
from clusterctl.runtime import docker as dk
from clusterctl.spec import yamlfile
from clusterctl.spec.model import ClusterSpec, parse_spec

Engine = Literal["auto", "kafka", "tansu"]
NAME_PREFIX = "ctltest"
# static addresses a spec may pin; on a freshly allocated subnet they come from the spec's default layout
STATIC_IP_KEYS = ("zookeeper.ips", "kafka.ips", "kraft.ips", "kafka_manager.ip", "spark.master_ip", "spark.worker_ips")


def set_key(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


def get_key(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for p in dotted.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def load(spec: str | Path | dict[str, Any] | ClusterSpec | None) -> dict[str, Any]:
    """The spec as plain data (a file must be valid as written)."""
    if spec is None:
        return {}
    if isinstance(spec, ClusterSpec):
        return spec.model_dump(mode="json", exclude_unset=True)
    if isinstance(spec, dict):
        return copy.deepcopy(spec)
    path = Path(spec)
    try:
        data = yamlfile.load_file(path, f"spec file {path}")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterctlError(f"spec file {path}: cannot read ({exc})") from None
    except yaml.YAMLError:
        raise ClusterctlError(f"spec file {path}: not valid YAML") from None
    parse_spec(data, str(path))  # the user's file must be valid as written
    return dict(data or {})


def choose(data: dict[str, Any], engine: Engine) -> str:
    """Profile and engine where the caller left them open (the profile depends on which images exist here);
    returns why this engine."""
    from clusterctl.spec.profiles import PROFILES

    if "profile" not in data:
        offline = PROFILES["offline"]
        data["profile"] = "offline" if not dk.missing_images([offline.zookeeper]) else "default"
    reason = "asked for"
    if engine == "auto":  # Apache Kafka; tansu only when asked for (a one-broker imitation, never chosen silently)
        engine = "kafka"
        reason = "Apache Kafka (engine auto; tansu only when asked for)"
    size(data, engine)
    return reason


def size(data: dict[str, Any], engine: str) -> None:
    """Engine, broker count and replication settings that fit together."""
    set_key(data, "kafka.engine", engine)
    if engine == "tansu":  # one broker, nothing to replicate
        set_key(data, "kafka.brokers", 1)
        for key in ("replication_factor", "min_insync_replicas"):
            set_key(data, f"kafka.defaults.{key}", 1)
    else:
        n = int(get_key(data, "kafka.brokers") or 3)
        rf = get_key(data, "kafka.defaults.replication_factor") or min(3, n)
        set_key(data, "kafka.defaults.replication_factor", rf)
        if get_key(data, "kafka.defaults.min_insync_replicas") is None:
            set_key(data, "kafka.defaults.min_insync_replicas", max(1, rf - 1))
    if get_key(data, "kafka_manager.enabled") is None:
        set_key(data, "kafka_manager.enabled", False)


def isolated(data: dict[str, Any], isolate: bool) -> tuple[ClusterSpec, dict[str, Any]]:
    """The spec with a unique name, a free subnet and free host ports (model and the data it came from)."""
    from clusterctl.runtime import allocate

    data = copy.deepcopy(data)
    if isolate:
        data["name"] = f"{NAME_PREFIX}-{uuid.uuid4().hex[:10]}"
        data["network"] = {"subnet": allocate.free_subnet()}
        for key in STATIC_IP_KEYS:
            if get_key(data, key) is not None:
                set_key(data, key, None)
        draft = parse_spec(data, "cluster spec")
        bind = draft.publish.bind_address
        zk_n, b_n = len(draft.topology.zk_ids), len(draft.topology.broker_ids)
        extra = ["kafka_manager.port"] if draft.kafka_manager.enabled else []
        if draft.spark.enabled:
            extra += ["spark.master_port", "spark.ui_port"]
        base = allocate.free_port_block(zk_n + b_n + len(extra), bind)
        if zk_n:  # none in kraft mode, where zookeeper settings are refused
            set_key(data, "zookeeper.client_port", base)
        set_key(data, "kafka.host_port", base + zk_n)
        for i, key in enumerate(extra):
            set_key(data, key, base + zk_n + b_n + i)
    return parse_spec(data, "cluster spec"), data
