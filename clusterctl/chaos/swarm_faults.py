"""Faults only a swarm has, and heal on a swarm.

`drain-node`: every service is pinned to its rack (a placement constraint on the node label), so a drained
node's tasks stop (a broker's controlled shutdown) and wait, pending, until the node is active again: they
never restart on another host without their volumes (a new, empty broker with the old broker.id, which would
truncate the partitions it leads). The pin holds only while the rack is one node: when another node carries the
same rack label, the tasks could start there without their data, and drain is refused.

`heal` on a swarm: drained or paused rack nodes made active, paused task containers unpaused, and a wait until
every service has a running task again (a killed or stopped task is restarted by the swarm itself).
"""

from __future__ import annotations

import time

from clusterctl.chaos.targets import FaultResult, service_target, state_of
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.runtime import swarm_tasks as sw
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

TASKS_BACK_S = 120.0  # the restart delay (10 s), an image start, and a loaded machine


def _services(spec: ClusterSpec) -> list[str]:
    topo = spec.topology
    return (
        [topo.zk_service(i) for i in topo.zk_ids]
        + [topo.controller_service(i) for i in topo.dedicated_controller_ids]
        + [topo.broker_service(i) for i in topo.broker_ids]
    )


def _task_state(spec: ClusterSpec, service: str) -> str:
    """The state of the service's current task, or of its container while the task runs (paused, exited: the
    swarm has not noticed yet); 'missing' when it has none."""
    task = sw.current_tasks(spec).get(service)
    state = str(((task or {}).get("Status") or {}).get("State", "missing"))
    if state == "running":
        try:
            return state_of(sw.task_container(spec, service))
        except ClusterctlError:
            return "exited"
    return state


def drain_node(spec: ClusterSpec, node: str, timeout: float | None = None) -> list[FaultResult]:
    """Drain a node: its tasks of this stack stop and stay pending until `chaos heal` (pinned to their rack).
    Refused with one line (exit 2), nothing changed, when another node carries the same rack label."""
    sw.require_swarm_spec(spec)
    rows = sw.node_rows(spec)
    row = sw.find_node(rows, node)
    if row.availability == "drain":
        raise UsageError(f"node {row.hostname} ({row.id[:12]}) is drained already; nothing was changed")
    twins = [r for r in rows if row.tasks and r.id != row.id and r.label is not None and r.label == row.label]
    if twins:
        others = ", ".join(f"{r.hostname} ({r.id[:12]})" for r in twins)
        raise UsageError(
            f"draining node {row.hostname} ({row.id[:12]}) would move {', '.join(row.tasks)} to {others}, also "
            f"labelled rack {row.label}, without their volumes; refused, nothing was changed",
            hint="a rack is one node: `clusterctl swarm label NODE --remove` on the other",
        )
    started, t0 = time.time(), time.monotonic()
    sw.set_availability(spec, row.id, "drain")
    grace = spec.kafka.stop_grace_seconds + 60.0
    wait_until(
        lambda: sw.running_on(spec, row.id),
        timeout=timeout or grace, what=f"the tasks on node {row.hostname} to stop", done=lambda left: not left,
        seen=lambda left: f"still running: {', '.join(left)}",
    )  # fmt: skip
    took = round(time.monotonic() - t0, 3)
    note = f"stopped {', '.join(row.tasks) or 'no task of this stack'}"
    if row.tasks:
        note += f": pinned to rack {row.label}, pending until `chaos heal`"
    out = [FaultResult("drain-node", f"node {row.hostname}", row.id[:12], "active", "drain", started, took, note)]
    for s in row.tasks:
        target, _ = service_target(spec, s)
        out.append(FaultResult("drain-node", target, f"{spec.name}_{s}", "running", _task_state(spec, s), started,
                               took, f"on drained node {row.hostname}"))  # fmt: skip
    return out


def heal(spec: ClusterSpec, timeout: float = TASKS_BACK_S) -> list[FaultResult]:
    """Undo every fault on a swarm: rack nodes active again, task containers unpaused, then wait until every
    service has a running task (a task killed or stopped is replaced by the swarm after its restart delay)."""
    from clusterctl.chaos.faults import unpause

    sw.require_swarm_spec(spec, "nothing was healed")
    out: list[FaultResult] = []
    racks = {r.name for r in spec.deploy.racks}
    for row in sw.node_rows(spec):
        if row.rack in racks and row.availability != "active":
            t, t0 = time.time(), time.monotonic()
            sw.set_availability(spec, row.id, "active")
            took = round(time.monotonic() - t0, 3)
            out.append(FaultResult("activate-node", f"node {row.hostname}", row.id[:12], row.availability, "active",
                                   t, took, f"rack {row.rack}"))  # fmt: skip
    down: dict[str, tuple[str, float]] = {}
    for service in _services(spec):
        target, _ = service_target(spec, service)
        state = _task_state(spec, service)
        if state == "paused":
            out.append(unpause(target, service, spec))
        elif state != "running":
            down[service] = (state, time.time())
    t0 = time.monotonic()
    wait_until(
        lambda: {s: st for s in down if (st := _task_state(spec, s)) != "running"},
        timeout=timeout, what="every service's task running again", done=lambda left: not left,
        seen=lambda left: "not running: " + ", ".join(f"{s} ({st})" for s, st in left.items()),
    )  # fmt: skip
    for service, (before, t) in down.items():
        target, _ = service_target(spec, service)
        name = str(sw.task_container(spec, service).name)
        out.append(FaultResult("start", target, name, before, "running", t, round(time.monotonic() - t0, 3),
                               "a new task, started by the swarm"))  # fmt: skip
    return out
