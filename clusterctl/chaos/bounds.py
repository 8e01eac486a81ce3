"""Which broker setting bounds each failover time, so a report can say why a number is what it is.

In ZooKeeper mode a broker that dies without a controlled shutdown (SIGKILL, a pause, a network cut) stays
registered in /brokers/ids until its ZooKeeper session expires (zookeeper.session.timeout.ms). Only then does
the controller elect new leaders for its partitions and drop it from every ISR. A follower that stops fetching
is dropped from the ISR by its leader after replica.lag.time.max.ms, whichever comes first. acks=all writes wait
for every ISR member, so the write gap of a partition the dead broker only followed is bounded by the smaller
of the two, and that of a partition it led by the session timeout. A controlled shutdown (SIGTERM) moves
leadership first and is bounded by neither.
"""

from __future__ import annotations

from typing import Any

SESSION = "zookeeper.session.timeout.ms"
FETCH_TIMEOUT = "controller.quorum.fetch.timeout.ms"  # KRaft: a voter that hears nothing from its leader this long
ELECTION_TIMEOUT = "controller.quorum.election.timeout.ms"  # ... stands for election after this (randomised to 2x)
KAFKA_FETCH_TIMEOUT_MS = 2000  # Kafka's default; the lab keeps it
# a broker's channel to the active controller keeps connecting to a controller whose address stopped answering (its
# container is gone) until this runs out, ±20% jitter, even once it knows the new leader
CONNECTION_SETUP = "socket.connection.setup.timeout.ms"
KAFKA_CONNECTION_SETUP_TIMEOUT_MS = 10_000
# faults that take the quorum's leader away: a new one is elected among the voters left
LEADER_LOST = {"kill-controller", "wipe-controller"}
KRAFT_SESSION = "broker.session.timeout.ms"  # KRaft: the active controller fences a broker silent this long
REPLICA_LAG = "replica.lag.time.max.ms"

# faults after which the broker stops answering without telling the controller
SILENT = {
    "kill-broker", "kill-leader", "kill", "pause", "pause-broker", "pause-follower", "partition-node", "kill-node",
}  # fmt: skip
GRACEFUL = {"stop-broker", "restart-broker", "rolling-restart"}
# grey network faults: the broker stays registered; a follower whose fetches lag leaves the ISR after the replica lag
DEGRADED = {"delay", "loss", "rate", "duplicate", "corrupt"}


def settings_of(spec: Any) -> dict[str, int]:
    """The bounding settings a spec gives its brokers (none for tansu, which has no replication)."""
    if spec.kafka.engine != "kafka":
        return {}
    d = spec.kafka.defaults
    if getattr(spec, "kraft_mode", False):
        return {
            KRAFT_SESSION: spec.kraft.broker_session_timeout_ms,
            REPLICA_LAG: d.replica_lag_time_max_ms,
            FETCH_TIMEOUT: KAFKA_FETCH_TIMEOUT_MS,
            ELECTION_TIMEOUT: spec.kraft.quorum_election_timeout_ms,
            CONNECTION_SETUP: KAFKA_CONNECTION_SETUP_TIMEOUT_MS,
        }
    return {SESSION: d.zookeeper_session_timeout_ms, REPLICA_LAG: d.replica_lag_time_max_ms}


def bounding_setting(action: str, metric: str, led_by_target: bool, settings: dict[str, Any]) -> str | None:
    """'zookeeper.session.timeout.ms 6000' for the setting that bounds `metric` after `action`, or None.

    metric: detected | new_leader | isr_shrunk | write_gap | metadata_gap.
    """
    if not settings:
        return None
    if action in LEADER_LOST and FETCH_TIMEOUT in settings:
        if metric == "metadata_gap":
            return metadata_gap_bound(settings, True)
        return quorum_election(settings) if metric == "detected" else None
    if action in GRACEFUL:
        return "controlled shutdown (leadership moves first)" if metric in ("new_leader", "write_gap") else None
    if action in DEGRADED:
        lag_bound = f"{REPLICA_LAG} {settings.get(REPLICA_LAG, 0)}"
        return lag_bound if metric == "isr_shrunk" or (metric == "write_gap" and not led_by_target) else None
    if action not in SILENT:
        return None
    name = KRAFT_SESSION if KRAFT_SESSION in settings else SESSION
    session = int(settings.get(name, 0))
    lag = int(settings.get(REPLICA_LAG, 0))
    if metric in ("detected", "new_leader") or (metric == "write_gap" and led_by_target):
        return f"{name} {session}"
    if metric in ("isr_shrunk", "write_gap"):
        return f"{name} {session}" if session <= lag else f"{REPLICA_LAG} {lag}"
    return None


def quorum_election(settings: dict[str, Any]) -> str:
    """What bounds a new quorum leader: the followers' fetch timeout, then an election timeout (randomised up to
    twice it) before a vote."""
    election = int(settings.get(ELECTION_TIMEOUT, 0))
    return f"{FETCH_TIMEOUT} {settings.get(FETCH_TIMEOUT)} + {ELECTION_TIMEOUT} {election}-{2 * election}"


def metadata_gap_bound(settings: dict[str, Any], leader_lost: bool) -> str:
    """What bounds the longest metadata-write gap of a drill on the controller quorum."""
    if leader_lost and FETCH_TIMEOUT in settings:
        return (
            f"{CONNECTION_SETUP} {settings.get(CONNECTION_SETUP)} ±20%: the brokers forward writes to the lost "
            f"leader's address until then (a new quorum leader after {quorum_election(settings)})"
        )
    return "one commit by a majority of the voters, which stayed up"


def explain(
    seconds: float | None,
    action: str,
    metric: str,
    led_by_target: bool,
    settings: dict[str, Any],
    elected_by: str | None = None,
) -> str:
    """'15.8 ≈ zookeeper.session.timeout.ms 18000' (or just the number when no setting bounds it). `elected_by`:
    the new leader came from outside the ISR (an ELR member, the last known leader, an unclean election): its
    return bounds the new leader's time and the write gap, not a timeout."""
    if seconds is None:
        return "-"
    if elected_by and (metric == "write_gap" or (metric == "new_leader" and led_by_target)):
        return f"{seconds:.1f} ≈ {elected_by}"
    bound = bounding_setting(action, metric, led_by_target, settings)
    return f"{seconds:.1f} ≈ {bound}" if bound else f"{seconds:.1f}"
