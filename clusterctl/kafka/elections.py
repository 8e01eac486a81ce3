"""Leader elections on confluent-kafka's AdminClient: what kafka-leader-election.sh does.

Stable API used by the console, the chaos runner and the `leader` command: `elect_leaders`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result
from clusterctl.kafka.retry import ELECT_RETRIABLE, controller_admin, retrying


@dataclass
class ElectionResult:
    topic: str
    partition: int
    ok: bool
    error: str | None = None


def elect_leaders(
    bootstrap: str,
    election_type: Literal["preferred", "unclean"] = "preferred",
    partitions: list[tuple[str, int]] | None = None,
    timeout: float = 30.0,
) -> list[ElectionResult]:
    """Preferred (or unclean) leader election, like kafka-leader-election.sh.

    `partitions=None` means every partition. ELECTION_NOT_NEEDED (the preferred replica already
    leads) counts as success. An attempt that gets no answer within REQUEST_TIMEOUT_S is asked again
    (an election asked twice elects once), all within `timeout` plus one attempt.
    """
    etype = ElectionType.PREFERRED if election_type == "preferred" else ElectionType.UNCLEAN
    tps = [TopicPartition(t, p) for t, p in partitions] if partitions is not None else None
    per_attempt = min(timeout, REQUEST_TIMEOUT_S)
    # confluent-kafka 2.x's elect_leaders rejects request_timeout/operation_timeout (its C call takes no
    # keywords), and both default to socket.timeout.ms: that is the per-attempt bound
    settings = {"socket_timeout_ms": int(per_attempt * 1000)}
    # the first client is made outside the retries: an unreachable or silent cluster stays one fast line
    first = [controller_admin(bootstrap, **settings)]

    def elect_once() -> Any:
        client = first.pop() if first else controller_admin(bootstrap, **settings)
        return _result(client.elect_leaders(etype, tps), bootstrap, per_attempt + 5)

    result = retrying(f"{election_type} election", elect_once, budget_s=timeout, retriable=ELECT_RETRIABLE)
    out = []
    for tp, err in sorted(result.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
        code = kerr.code() if isinstance(kerr, KafkaError) else None
        ok = err is None or code == KafkaError.ELECTION_NOT_NEEDED
        out.append(ElectionResult(tp.topic, tp.partition, ok, None if ok else str(err)))
    return out
