"""Register the cluster in CMAK (kafka-manager), which cannot find a cluster by itself.

CMAK's own HTTP contract (yahoo/CMAK conf/routes and app/controllers/Cluster.scala):
- `GET /api/status/clusters` answers `{"clusters": {"active": [{"name": ...}, ...], "pending": [...]}}`;
- `GET /addCluster` is the form; its `<select name="kafkaVersion">` lists the Kafka versions this CMAK knows
  (the form refuses any other with 400);
- `POST /clusters` (form-encoded: name, zkHosts, kafkaVersion, jmxEnabled, pollConsumers, filterConsumers,
  logkafkaEnabled, activeOffsetCacheEnabled, displaySizeEnabled, securityProtocol) adds it; the answer is an
  HTML page (200) also when CMAK refused internally, so success is checked by listing the clusters again.

Idempotent: a cluster already listed (by name) is left as it is. Every wait is bounded (`wait_until`).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from clusterctl.errors import ClusterctlError
from clusterctl.wait import wait_until

REQUEST_TIMEOUT_S = 5.0
FALLBACK_KAFKA_VERSION = "2.4.0"  # in every CMAK 3.x form (CMAK speaks to newer brokers through ZooKeeper)
_SELECT = re.compile(r"<select[^>]*\bname=\"kafkaVersion\"[^>]*>(.*?)</select>", re.S | re.I)
_OPTION = re.compile(r"<option[^>]*\bvalue=\"([0-9][0-9A-Za-z.\-]*)\"", re.I)


@dataclass
class CmakRegistration:
    url: str
    cluster: str
    zk_hosts: str
    kafka_version: str
    added: bool  # False: CMAK listed the cluster already and it was left alone


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as resp:
        return str(resp.read().decode("utf-8", "replace"))


def listed(base_url: str) -> list[str]:
    """Names of the clusters CMAK knows (active and pending)."""
    data = json.loads(_get(f"{base_url}/api/status/clusters"))
    groups = (data or {}).get("clusters") or {}
    return [str(c.get("name")) for key in ("active", "pending") for c in (groups.get(key) or [])]


def known_versions(base_url: str) -> list[str]:
    """The kafkaVersion choices of CMAK's add-cluster form (empty when the page does not show them)."""
    m = _SELECT.search(_get(f"{base_url}/addCluster"))
    return _OPTION.findall(m.group(1)) if m else []


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def pick_version(known: list[str], broker: tuple[int, int] | None) -> str:
    """The newest version CMAK knows that is not newer than the broker's (else the newest it knows)."""
    if not known:
        return FALLBACK_KAFKA_VERSION
    ordered = sorted(known, key=_key)
    fitting = [v for v in ordered if broker is None or _key(v)[:2] <= broker]
    return (fitting or ordered)[-1]


def form(name: str, zk_hosts: str, kafka_version: str) -> dict[str, str]:
    """The fields CMAK's clusterConfigForm binds (booleans as Play reads them; tuning left to CMAK's defaults)."""
    return {
        "name": name,
        "zkHosts": zk_hosts,
        "kafkaVersion": kafka_version,
        "jmxEnabled": "false",
        "jmxSsl": "false",
        "pollConsumers": "true",
        "filterConsumers": "true",
        "logkafkaEnabled": "false",
        "activeOffsetCacheEnabled": "true",
        "displaySizeEnabled": "false",
        "securityProtocol": "PLAINTEXT",
    }


def _post(url: str, fields: dict[str, str]) -> None:
    body = urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S):
            return
    except urllib.error.HTTPError as exc:
        text = re.sub(r"<[^>]+>|\s+", " ", exc.read().decode("utf-8", "replace")).strip()
        raise ClusterctlError(f"CMAK refused cluster {fields['name']}: HTTP {exc.code} {text[:200]}") from None


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, (OSError, ValueError))  # not up yet, connection reset, half-written JSON


def register(
    base_url: str, name: str, zk_hosts: str, broker: tuple[int, int] | None, timeout: float = 120.0
) -> CmakRegistration:
    """Add the cluster to CMAK unless it is listed already; waits (bounded) for CMAK to answer first."""
    base_url = base_url.rstrip("/")
    names = wait_until(
        lambda: listed(base_url), timeout=timeout, what=f"CMAK at {base_url} to answer",
        done=lambda _r: True, retry_on=_transient, interval=1.0, max_interval=5.0,
    )  # fmt: skip
    if name in names:
        return CmakRegistration(base_url, name, zk_hosts, "", added=False)
    version = pick_version(known_versions(base_url), broker)
    _post(f"{base_url}/clusters", form(name, zk_hosts, version))
    wait_until(
        lambda: name in listed(base_url), timeout=min(timeout, 30.0), what=f"CMAK to list cluster {name}",
        retry_on=_transient, interval=0.5, max_interval=2.0,
    )  # fmt: skip
    return CmakRegistration(base_url, name, zk_hosts, version, added=True)
