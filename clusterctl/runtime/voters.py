"""Changing a dynamic quorum's voters (KIP-853): `clusterctl quorum add-controller / remove-controller`.

Both run Kafka's own `kafka-metadata-quorum.sh` inside a controller's container (a JVM for about a second; these
are one-off changes, unlike the observer's sub-second DescribeQuorum polling), then wait until DescribeQuorum shows
the new voter set:

- add-controller runs in the joining controller's container with its own configuration (the tool reads its node id,
  its directory id from the log dir's meta.properties and its CONTROLLER endpoint from it). The listener there is
  0.0.0.0, which the tool would send as the voter's endpoint, so `advertised.listeners` names the service.
  Before it: the controller must be an observer that has caught up with the leader.
- remove-controller names the voter by node id and directory id; it runs in any running controller.

Kafka keeps one voter per node id (AddRaftVoter answers DUPLICATE_VOTER otherwise): a controller that came back
under its old node id with a fresh directory is added only once its dead entry is removed. Both refuse before
anything runs on a static quorum.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.kafka.kraft import quorum as kraft
from clusterctl.kafka.kraft.describe_quorum import QuorumInfo
from clusterctl.runtime import docker as dk
from clusterctl.runtime.kraftformat import refuse_static
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

TOOL = "kafka-metadata-quorum.sh"
# AddVoterHandler's answers while the new voter is not reachable from the leader yet (it asks it for ApiVersions)
NOT_READY = ("BROKER_NOT_AVAILABLE", "REQUEST_TIMED_OUT", "not ready to receive", "NOT_LEADER", "no quorum answer")


@dataclass
class VoterChange:
    """One add-controller or remove-controller, as the quorum showed it afterwards."""

    action: str  # add-controller | remove-controller
    node_id: int
    service: str
    directory_id: str
    seconds: float  # from the tool's start until DescribeQuorum showed the change
    tool_seconds: float  # the tool alone (its JVM's start included)
    voters: list[str] = field(default_factory=list)  # id:directory-id of every voter afterwards
    leader_id: int | None = None
    tool_output: str = ""


def voter_keys(info: QuorumInfo) -> list[str]:
    return [f"{v.node_id}:{v.directory_id or '-'}" for v in info.voters]


def _tool(container: str, script: str) -> tuple[str, float]:
    """Run `script` (bash) in `container`; (Kafka's last line, seconds). ClusterctlError with the tool's own reason."""
    c = dk.get_container(container)
    t0 = time.monotonic()
    res = c.exec_run(["bash", "-c", script], demux=True, environment={"KAFKA_HEAP_OPTS": "-Xmx256m"})
    took = round(time.monotonic() - t0, 2)
    out = b"".join(part or b"" for part in res.output).decode("utf-8", "replace")
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if res.exit_code != 0:
        raise ClusterctlError(f"`{TOOL}` in {container} failed (exit {res.exit_code}): {tool_reason(out)}")
    return (lines[-1] if lines else ""), took


def tool_reason(output: str) -> str:
    """The one line of a failed Kafka tool's output that says why: its last exception's message."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    reasons = [ln for ln in lines if re.search(r"\w(Exception|Error): ", ln)]
    last = (reasons or lines or ["(no output)"])[-1]
    return re.sub(r"^(Caused by: )?[\w.$]+(Exception|Error): ", "", last)[:400]


def _is_voter(info: QuorumInfo, node_id: int, directory_id: str) -> bool:
    return any((v.node_id, v.directory_id) == (node_id, directory_id) for v in info.voters)


def _not_ready(exc: BaseException) -> bool:
    """An add the leader refused for now: it could not reach the new voter yet (its connection to the address the
    dead controller had may still be timing out), or no leader."""
    return isinstance(exc, ClusterctlError) and any(m in exc.message for m in NOT_READY)


def _bootstrap(spec: ClusterSpec) -> str:
    return spec.topology.controller_quorum_bootstrap_servers


def directory_of(spec: ClusterSpec, node_id: int) -> str:
    """The directory id in controller `node_id`'s meta.properties (its container must run)."""
    container = spec.topology.controller_container(node_id)
    c = dk.get_container(container)
    if c.status != "running":
        raise ClusterctlError(f"{container} is {c.status}, not running", hint="`clusterctl chaos heal` starts it")
    res = c.exec_run(["cat", f"{spec.image_profile.kafka_data_dir}/meta.properties"])
    found = re.search(rb"^directory\.id=(\S+)$", res.output or b"", re.MULTILINE)
    if res.exit_code != 0 or found is None:
        raise ClusterctlError(f"{container} has no formatted log dir (no directory.id in meta.properties)")
    return found.group(1).decode()


def _controller(spec: ClusterSpec, node_id: int) -> str:
    if node_id not in spec.topology.controller_ids:
        raise NotFoundError(
            f"controller {node_id} is not in cluster {spec.name} (controllers: "
            f"{', '.join(map(str, spec.topology.controller_ids))})"
        )
    return spec.topology.controller_service(node_id)


def behind(spec: ClusterSpec, node_id: int, directory_id: str) -> tuple[QuorumInfo, str]:
    """(the quorum, why controller (node_id, directory_id) has not caught up, or "" when it has): it fetches from the
    leader and has the high watermark."""
    info = kraft.describe(spec)
    me = [r for r in info.voters + info.observers if (r.node_id, r.directory_id) == (node_id, directory_id)]
    if info.leader_id < 0:
        return info, "no quorum leader"
    if not me or me[0].log_end_offset < 0:
        return info, f"controller {node_id} ({directory_id}) not fetching from the leader yet"
    lag = info.high_watermark - me[0].log_end_offset
    return info, ("" if lag <= 0 else f"controller {node_id} {lag} records behind the high watermark")


def wait_caught_up(spec: ClusterSpec, node_id: int, directory_id: str, timeout: float) -> QuorumInfo:
    """Until controller (node_id, directory_id) fetches from the leader and has the high watermark."""
    return wait_until(
        lambda: behind(spec, node_id, directory_id), timeout=timeout, interval=0.5,
        what=f"controller {node_id} to catch up with the quorum leader", done=lambda r: not r[1],
        seen=lambda r: r[1], retry_on=lambda e: isinstance(e, ClusterctlError),
    )[0]  # fmt: skip


def _wait_voters(spec: ClusterSpec, what: str, holds: Callable[[QuorumInfo], bool]) -> QuorumInfo:
    return wait_until(
        lambda: kraft.describe(spec), timeout=60.0, what=what, interval=0.25, done=holds,
        seen=lambda i: f"voters {', '.join(voter_keys(i))}", retry_on=lambda e: isinstance(e, ClusterctlError),
    )  # fmt: skip


def add_controller(spec: ClusterSpec, node_id: int, timeout: float = 120.0) -> VoterChange:
    """Make controller `node_id` (running, an observer with its own directory) a voter."""
    refuse_static(spec, "add-controller")
    service = _controller(spec, node_id)
    directory = directory_of(spec, node_id)
    info = kraft.describe(spec)
    mine = [v for v in info.voters if v.node_id == node_id]
    if any(v.directory_id == directory for v in mine):
        raise UsageError(f"controller {node_id} (directory {directory}) is a voter already")
    if mine:
        old = mine[0].directory_id
        raise UsageError(
            f"controller {node_id} is still a voter with directory {old} (Kafka keeps one voter per node id): "
            f"remove that one first, `clusterctl quorum remove-controller {node_id} --directory-id {old}`"
        )
    wait_caught_up(spec, node_id, directory, timeout)
    port = spec.kraft.controller_port
    config = "/tmp/add-controller.properties"
    script = (
        f"cp /etc/kafka/server.properties {config} && echo advertised.listeners=CONTROLLER://{service}:{port} "
        f">> {config} && {TOOL} --bootstrap-controller {shlex.quote(_bootstrap(spec))} --command-config {config} "
        "add-controller"
    )
    container = spec.topology.controller_container(node_id)

    def attempt() -> tuple[str, float]:
        if _is_voter(kraft.describe(spec), node_id, directory):  # an earlier attempt's answer was lost
            return "", 0.0
        return _tool(container, script)

    t0 = time.monotonic()
    line, took = wait_until(
        attempt, timeout=timeout, what=f"the quorum leader to add controller {node_id}", interval=1.0,
        done=lambda _r: True, retry_on=_not_ready,
    )  # fmt: skip
    after = _wait_voters(spec, f"controller {node_id} among the voters", lambda i: _is_voter(i, node_id, directory))
    return _change("add-controller", node_id, service, directory, t0, took, after, line)


def remove_controller(spec: ClusterSpec, node_id: int, directory_id: str) -> VoterChange:
    """Remove the voter (node_id, directory_id), e.g. a controller whose disk is gone."""
    refuse_static(spec, "remove-controller")
    service = _controller(spec, node_id)
    info = kraft.describe(spec)
    if not _is_voter(info, node_id, directory_id):
        raise NotFoundError(
            f"no voter {node_id} with directory {directory_id}; voters: {', '.join(voter_keys(info))}",
            hint="`clusterctl quorum` shows each voter's directory id",
        )
    runner = _running_controller(spec, prefer_not=node_id)
    script = (
        f"{TOOL} --bootstrap-controller {shlex.quote(_bootstrap(spec))} remove-controller --controller-id {node_id} "
        f"--controller-directory-id {shlex.quote(directory_id)}"
    )
    t0 = time.monotonic()
    line, took = _tool(runner, script)
    gone = f"voter {node_id} ({directory_id}) gone"
    after = _wait_voters(spec, gone, lambda i: not _is_voter(i, node_id, directory_id))
    return _change("remove-controller", node_id, service, directory_id, t0, took, after, line)


def _running_controller(spec: ClusterSpec, prefer_not: int) -> str:
    names = [spec.topology.controller_container(n) for n in spec.topology.controller_ids if n != prefer_not]
    names.append(spec.topology.controller_container(prefer_not))
    for name in names:
        c = dk.find_container(name)
        if c is not None and c.status == "running":
            return name
    raise ClusterctlError(f"no controller of cluster {spec.name} is running", hint="clusterctl up")


def _change(
    action: str, node_id: int, service: str, directory: str, t0: float, took: float, after: QuorumInfo, line: str
) -> VoterChange:
    return VoterChange(
        action, node_id, service, directory, round(time.monotonic() - t0, 2), took, voter_keys(after),
        after.leader_id if after.leader_id >= 0 else None, line,
    )  # fmt: skip
