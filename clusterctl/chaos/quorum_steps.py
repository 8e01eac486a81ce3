"""The steps of a dynamic-quorum drill (kraft.quorum: dynamic, KIP-853); quorum_run.py carries them out.

    - metadata_probe: {action: start, interval: 0.5}   # a metadata write (topic create / delete) every 0.5 s
    - fault: {action: wipe-controller, node: controller}  # the active controller killed, its disk removed
    - quorum: {action: provision-controller}           # the replacement: fresh disk, --no-initial-controllers
    - wait_for: {controller_caught_up: {}}              # it has fetched the whole metadata log as an observer
    - quorum: {action: remove-controller}              # the dead voter, by the directory id the wipe saw
    - quorum: {action: add-controller}                 # the replacement, by its new directory id
    - metadata_probe: {action: stop, max_gap: 30}      # fails when a write waited longer than 30 s

`controller` defaults to the node of the latest wipe-controller fault before the step. A scenario with any of these
is refused before anything starts on a cluster whose quorum is static.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clusterctl.errors import UsageError
from clusterctl.spec import validate


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


CONTROLLER = Field(default=None, ge=1, description="the controller's node id (default: the one the last wipe hit)")


class QuorumChange(_Step):
    action: Literal["provision-controller", "add-controller", "remove-controller"] = Field(
        description="provision-controller: start the controller on a fresh disk formatted with "
        "--no-initial-controllers (an observer); add-controller / remove-controller: Kafka's, on a dynamic quorum"
    )
    controller: int | None = CONTROLLER
    directory_id: str | None = Field(
        default=None, description="remove-controller: the voter's directory id (default: the one the wipe removed)"
    )
    timeout: float = Field(default=120.0, gt=0, le=validate.MAX_SECONDS, description="add-controller: the catch-up")

    @model_validator(mode="after")
    def _directory_for_remove(self) -> QuorumChange:
        if self.directory_id is not None:
            if self.action != "remove-controller":
                raise ValueError("directory_id is for action: remove-controller")
            try:
                validate.directory_id(self.directory_id, "directory_id")
            except UsageError as exc:
                raise ValueError(exc.message) from None
        return self


class ControllerRef(_Step):
    controller: int | None = CONTROLLER


class MetadataProbe(_Step):
    action: Literal["start", "stop"] = Field(
        description="start: create and delete a topic in turn through the brokers; stop: its summary (longest gap)"
    )
    interval: float = Field(default=0.5, ge=0.05, le=60.0, description="start: seconds between two writes")
    max_gap: float | None = Field(
        default=None, gt=0, le=validate.MAX_SECONDS, description="stop: fail when no write succeeded for longer (s)"
    )


QUORUM_KINDS = ("quorum", "metadata_probe")


def uses_dynamic_quorum(steps: list[tuple[str, object]]) -> bool:
    """Whether a scenario changes the quorum's voters (it needs kraft.quorum: dynamic)."""
    return any(
        kind == "quorum"
        or (kind == "fault" and getattr(a, "action", None) == "wipe-controller")
        or (kind in ("wait_for", "assert") and getattr(a, "name", None) == "controller_caught_up")
        for kind, a in steps
    )


def _controller_ref(kind: str, a: object) -> QuorumChange | ControllerRef | None:
    if isinstance(a, QuorumChange):
        return a
    if kind in ("wait_for", "assert") and getattr(a, "name", None) == "controller_caught_up":
        ref = getattr(a, "controller_caught_up", None)
        return ref if isinstance(ref, ControllerRef) else None
    return None


def check_quorum_steps(steps: list[tuple[str, object]], mode: str) -> None:
    """One line each: quorum steps on KRaft only, `controller` omitted only after a wipe, the probe started once
    and stopped after it starts."""
    wiped = probing = False
    for index, (kind, a) in enumerate(steps, 1):
        if kind == "fault" and getattr(a, "action", None) == "wipe-controller":
            wiped = True
        ref = _controller_ref(kind, a)
        if (ref is not None or kind == "metadata_probe") and mode == "zookeeper":
            raise ValueError(f"step {index} ({kind}): a controller-quorum step; this is for mode: zookeeper")
        if ref is not None and ref.controller is None and not wiped:
            raise ValueError(f"step {index} ({kind}): no controller given and no wipe-controller fault before it")
        if isinstance(a, MetadataProbe):
            if a.action == "start" and probing:
                raise ValueError(f"step {index} (metadata_probe): the probe is running already")
            if a.action == "stop" and not probing:
                raise ValueError(f"step {index} (metadata_probe): no probe is running (action: start comes first)")
            probing = a.action == "start"
