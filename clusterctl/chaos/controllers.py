"""A controller whose disk is gone, on a dynamic quorum (kraft.quorum: dynamic, KIP-853): the fault and its undo.

- `wipe_controller`: SIGKILL a voter, remove its container and its data volume (runtime.kraftformat.wipe). The
  quorum still lists it as a voter, by its node id and directory id, until that entry is removed.
- `provision_controller`: a replacement under the same node id on a fresh volume, formatted with
  `--no-initial-controllers` (a new directory id), started: an observer until it is added.
- `restore_voters` (part of `chaos heal`): every controller of the spec a voter again with the directory it runs
  on: a voter entry of its node id with another (dead) directory is removed, then it is added once it has caught up
  (runtime.voters; Kafka keeps one voter per node id).

On a static quorum the wipe is refused before anything is touched: a static voter that comes back with an empty
log under its old identity may vote for a leader that lacks committed records.
"""

from __future__ import annotations

import time

from clusterctl.chaos.targets import FaultResult, controller_target
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka.kraft import quorum as kraft
from clusterctl.runtime import docker as dk
from clusterctl.runtime import kraftformat, voters
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until


def wipe_controller(spec: ClusterSpec, node_id: int) -> tuple[FaultResult, str | None]:
    """Kill controller `node_id` and remove its data volume; (what was done, the directory id the quorum knew it
    by, None when the quorum did not answer)."""
    kraftformat.refuse_static(spec, "wipe-controller")
    target, name = controller_target(spec, node_id)
    if node_id not in spec.topology.dedicated_controller_ids:
        raise UsageError(f"wipe-controller: {target} is not a dedicated controller")
    try:
        info = kraft.describe(spec)
        directory = next((v.directory_id for v in info.voters if v.node_id == node_id), None)
    except ClusterctlError:  # the wipe still goes ahead; the quorum is asked again by remove-controller
        directory = None
    before = dk.get_container(name).status
    w = kraftformat.wipe(spec, node_id, directory)
    note = f"volume {w.volume} removed; the quorum knew it as directory {directory or 'unknown'}"
    return FaultResult("wipe-controller", target, name, before, "removed", w.started, w.took_s, note), directory


def provision_controller(spec: ClusterSpec, node_id: int) -> FaultResult:
    """Start controller `node_id` again on a fresh disk formatted with --no-initial-controllers (or on the disk it
    still has when only its container was removed)."""
    target, name = controller_target(spec, node_id)
    started = time.time()
    t0 = time.monotonic()
    formatted = kraftformat.provision(spec, node_id)
    if formatted is None:
        note = "started on the volume it had"
    else:
        note = f"formatted {formatted.flag}: directory {formatted.directory_id}, an observer until it is added"
    return FaultResult("provision-controller", target, name, "missing", "running", started,
                       round(time.monotonic() - t0, 3), note)  # fmt: skip


def missing_controllers(spec: ClusterSpec) -> list[int]:
    """Dedicated controllers of a dynamic quorum whose container is gone."""
    if not kraftformat.dynamic(spec):
        return []
    return [
        n
        for n in spec.topology.dedicated_controller_ids
        if dk.find_container(spec.topology.controller_container(n)) is None
    ]


def restore_voters(spec: ClusterSpec, timeout: float = 120.0) -> list[FaultResult]:
    """Every controller of a dynamic quorum a voter with the directory it runs on (dead entries removed first)."""
    if not kraftformat.dynamic(spec):
        return []
    out = []
    for node_id in spec.topology.controller_ids:
        directory = voters.directory_of(spec, node_id)
        info = _with_leader(spec)
        mine = [v for v in info.voters if v.node_id == node_id]
        if any(v.directory_id == directory for v in mine):
            continue
        target, name = controller_target(spec, node_id)
        for dead in mine:
            r = voters.remove_controller(spec, node_id, dead.directory_id or "")
            out.append(_result("remove-controller", target, name, r))
        out.append(_result("add-controller", target, name, voters.add_controller(spec, node_id, timeout)))
    return out


def _with_leader(spec: ClusterSpec) -> kraft.QuorumInfo:
    """DescribeQuorum once the quorum has a leader (controllers a heal has just started elect one first)."""
    return wait_until(
        lambda: kraft.describe(spec), timeout=60.0, what="a controller quorum leader", interval=0.5,
        done=lambda i: i.leader_id >= 0, seen=lambda i: f"leader {i.leader_id}, epoch {i.leader_epoch}",
        retry_on=lambda e: isinstance(e, ClusterctlError),
    )  # fmt: skip


def _result(action: str, target: str, name: str, r: voters.VoterChange) -> FaultResult:
    note = f"directory {r.directory_id}; voters {', '.join(r.voters)}"
    after = "voter" if action == "add-controller" else "removed"
    return FaultResult(action, target, name, "-", after, time.time() - r.seconds, r.seconds, note)
