"""The scenario steps of a migration drill (models, and which phases each `migrate` step will run).

    - consume: {group: g, max_messages: 500}       # read as consumer group g and commit what was read
                                                   # (group_protocol: classic | consumer)
    - snapshot: {name: before}                     # topics, their configs, every group's committed offsets
    - migrate: {to: kraft, until_phase: 2}         # `migrate kraft --to 2 --yes`; no until_phase: every phase
    - migrate: {to: zookeeper}                     # `migrate rollback`
    - snapshot: {name: after, same_as: before}     # fails on any difference from `before`
    - upgrade: {to: newest, finalize: true}         # `upgrade --to V --yes`: the rolling upgrade (KRaft)
    - upgrade: {to: start, finalize: false}         # back to the version the drill began on (before finalize)

The steps run through the same calls as `clusterctl migrate kraft` / `migrate rollback` (runtime.migrate);
migrate_run.py carries them out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clusterctl.compose.migration import PHASES
from clusterctl.kafka.kraft import migration as plan
from clusterctl.spec import validate

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Migrate(_Step):
    to: Literal["kraft", "zookeeper"]
    until_phase: int | None = Field(default=None, description="kraft: stop after this phase (default: all)")
    timeout: float = Field(default=300.0, gt=0, le=validate.MAX_SECONDS, description="each wait of a phase")

    @field_validator("until_phase")
    @classmethod
    def _known_phase(cls, v: int | None) -> int | None:
        if v is not None and not 1 <= v <= len(PHASES):
            names = ", ".join(f"{p.number} {p.name}" for p in PHASES)
            raise ValueError(f"phase {v} does not exist: one of {names}")
        return v

    @model_validator(mode="after")
    def _until_is_for_kraft(self) -> Migrate:
        if self.to == "zookeeper" and self.until_phase is not None:
            raise ValueError("until_phase is for to: kraft (a rollback reverts whatever phase the migration reached)")
        return self


class Upgrade(_Step):
    to: str = Field(
        pattern=r"^(newest|start|\d+\.\d+\.\d+)$",
        description="a Kafka release; newest: the newest built; start: the version the cluster ran as the drill began",
    )
    finalize: bool = Field(default=True, description="finalize the feature levels after the roll (`--yes`)")
    until: str | None = Field(
        default=None, pattern=r"^(controller|kafka)\d{1,3}$", description="stop after this node (a partial roll)"
    )
    timeout: float = Field(default=300.0, gt=0, le=validate.MAX_SECONDS, description="each node's wait")

    @model_validator(mode="after")
    def _no_finalize_part_way(self) -> Upgrade:
        if self.until is not None and self.finalize:
            raise ValueError("until stops the roll part way: give finalize: false with it")
        return self


class Consume(_Step):
    group: str | None = Field(default=None, pattern=NAME, description="default: drill-<scenario>-<run id>")
    topic: str | None = None
    max_messages: int = Field(default=500, ge=1, le=validate.MAX_RECORDS)
    timeout: float = Field(default=30.0, gt=0, le=validate.MAX_SECONDS)
    group_protocol: Literal["classic", "consumer"] = Field(default="classic", description="consumer: KIP-848")


class Snapshot(_Step):
    name: str = Field(pattern=NAME)
    same_as: str | None = Field(default=None, description="an earlier snapshot: fail on any difference from it")


def plan_migrations(steps: list[tuple[int, object]], state: plan.MigrationState | None, cluster: str) -> list[str]:
    """What each `migrate` step of a scenario will do, in order, from the recorded migration `state`; a step
    that cannot run (nothing to roll back, a rollback after finalize) or would run nothing is refused with one
    line, before any work.

    `steps` are (step number, Migrate); the answer has one line per step.
    """
    out: list[str] = []
    for index, m in steps:
        assert isinstance(m, Migrate)
        try:
            if m.to == "kraft":
                if state is None or state.rolled_back:
                    state = plan.MigrationState(cluster, "3.7", 3)  # what matters here: nothing done yet
                todo = plan.plan(state, m.until_phase, yes=True)
                if not todo:  # a drill that migrates nothing would pass without testing anything
                    raise plan.MigrationRefused(
                        f"nothing would run: the migration state records phases 1-{state.last_done} done "
                        "(left by an earlier run? remove the state file beside the spec to start again)"
                    )
                state = replace(state, done=[*state.done, *(p.name for p in todo)], current=None)
                out.append("phases " + ", ".join(f"{p.number} {p.name}" for p in todo))
            else:
                if state is None or state.rolled_back or plan.rollback_level(state) == 0:
                    raise plan.MigrationRefused("nothing to roll back: no migration phase was begun")
                level = plan.rollback_level(state)
                state = replace(state, rolled_back=True)
                out.append(f"roll back from phase {level}: " + "; ".join(plan.ROLLBACK_STEPS[level]))
        except plan.MigrationRefused as exc:
            raise plan.MigrationRefused(f"step {index} (migrate to {m.to}): {exc.message}") from None
    return out


def check_steps(steps: list[tuple[str, object]], mode: str, requires: str) -> None:
    """Checks across steps, one line each: a snapshot compared with one taken earlier, snapshot names once,
    `migrate` steps only in a scenario for a ZooKeeper-mode Kafka cluster, and `upgrade` only on KRaft."""
    names: list[str] = []
    for index, (kind, args) in enumerate(steps, 1):
        if kind == "snapshot":
            assert isinstance(args, Snapshot)
            if args.same_as is not None and args.same_as not in names:
                raise ValueError(f"step {index} (snapshot): same_as: no earlier snapshot is named {args.same_as!r}")
            if args.name in names:
                raise ValueError(f"step {index} (snapshot): a snapshot named {args.name!r} was taken already")
            names.append(args.name)
        if kind == "migrate" and (mode != "zookeeper" or requires != "kafka"):
            raise ValueError(
                f"step {index} (migrate): a migration drill needs mode: zookeeper and requires: kafka "
                f"(got mode: {mode}, requires: {requires})"
            )
        if kind == "upgrade" and not (requires == "kafka" and (mode == "kraft" or _migrated_before(steps, index))):
            raise ValueError(
                f"step {index} (upgrade): an upgrade drill needs requires: kafka and mode: kraft, or a "
                f"`migrate: {{to: kraft}}` of every phase before it (got mode: {mode}, requires: {requires})"
            )


def _migrated_before(steps: list[tuple[str, object]], index: int) -> bool:
    """A `migrate: {to: kraft}` of every phase (the spec is KRaft after it) before step `index` (1-based)."""
    return any(
        kind == "migrate" and isinstance(a, Migrate) and a.to == "kraft" and a.until_phase is None
        for kind, a in steps[: index - 1]
    )


def planned_from_scratch(steps: list[tuple[str, object]], cluster: str) -> dict[int, str]:
    """Step number → what its `migrate` will do on a cluster where no migration was begun (`scenario validate`);
    empty when the scenario only makes sense after an earlier migration (its plan is known at run time)."""
    migrations = [(i, args) for i, (kind, args) in enumerate(steps, 1) if kind == "migrate"]
    try:
        lines = plan_migrations(migrations, None, cluster)
    except plan.MigrationRefused:
        return {}
    return {i: line for (i, _m), line in zip(migrations, lines, strict=True)}
