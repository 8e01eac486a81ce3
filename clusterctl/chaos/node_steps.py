"""The node step of a swarm drill: `kill_node` stops the Docker daemon of a rack's host (chaos/nodes.py); `heal`
starts it again. A scenario with a kill_node step says `deploy: swarm`; on a compose cluster it is refused
before anything is touched (node_run.py runs the step).

    - kill_node: {rack: leader, partition: 0}    # the rack of partition 0's leader now (or follower, or r2)
    - wait_for: {leaders_live: {}}                # every partition led by a broker on a rack still up
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class KillNode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    rack: str = Field(
        min_length=1, max_length=100,
        description="a rack, a swarm node's hostname, or leader / follower: the rack of that replica of "
        "topic-partition now",
    )  # fmt: skip
    topic: str | None = None
    partition: int = Field(default=0, ge=0)


def check_node_steps(steps: list[tuple[str, object]], deploy: str) -> None:
    """A kill_node step only in a scenario that says `deploy: swarm` (one line)."""
    for index, (kind, _args) in enumerate(steps, 1):
        if kind == "kill_node" and deploy != "swarm":
            raise ValueError(f"step {index} (kill_node): a node drill needs deploy: swarm (got deploy: {deploy})")
