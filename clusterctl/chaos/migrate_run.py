"""The migration steps of a drill run: `migrate` (through runtime.migrate, as `clusterctl migrate` runs it),
`upgrade` (through runtime.upgrade, as `clusterctl upgrade`), `consume` (a consumer group with committed offsets)
and `snapshot` (and its comparison).

`MigrateSteps` is a part of the Runner (runner.py): each migration phase, and each node an upgrade rolls, is a band
on the observer's timeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterctl.chaos.conditions import Conditions
from clusterctl.chaos.migration_steps import Consume, Migrate, Snapshot, Upgrade, plan_migrations
from clusterctl.errors import ClusterctlError, UsageError, VerificationError
from clusterctl.spec.model import ClusterSpec

SNAPSHOT_TIMEOUT_S = 60.0  # a group's coordinator may still be loading its offsets after a rolling restart


class MigrateSteps:
    """The `migrate`, `consume` and `snapshot` steps; the Runner supplies the state declared here."""

    spec: ClusterSpec
    spec_path: Path | None
    bootstrap: str
    topic: str
    run_id: str
    sc: Any
    observer: Any
    cond: Conditions
    snapshots: dict[str, Any]
    progress: Any
    upgrade_start: str | None = None  # the KRaft version the cluster ran at preflight (`upgrade: {to: start}`)

    def _migration_preflight(self, steps: list[Any]) -> list[str]:
        """Refuse a migration drill that cannot run here, before any work: one line each."""
        from clusterctl.kafka.kraft import migration as plan

        migrations = [(i, s.args) for i, s in enumerate(steps, 1) if s.kind == "migrate"]
        if not migrations:
            return []
        if self.spec_path is None:
            raise UsageError(f"scenario {self.sc.name} migrates the cluster: it needs the spec file's path")
        if any(m.to == "kraft" for _i, m in migrations):
            plan.check_migratable(self.spec, self.spec.broker_image)
        state = plan.load_state(plan.state_path(self.spec_path))
        return plan_migrations(migrations, state, self.spec.name)

    def _upgrade_preflight(self, steps: list[Any]) -> list[str]:
        """Refuse an upgrade drill that cannot run here, before any work; what each `upgrade` step will do.

        On a KRaft cluster the first upgrade must move it: a drill that rolls nothing would pass untested."""
        from clusterctl.kafka import upgrade_plan as uplan
        from clusterctl.runtime import upgrade
        from clusterctl.spec.kafkadist import built_versions

        ups = [(i, s.args) for i, s in enumerate(steps, 1) if s.kind == "upgrade"]
        if not ups:
            return []
        if self.spec_path is None:
            raise UsageError(f"scenario {self.sc.name} upgrades the cluster: it needs the spec file's path")
        built = built_versions()
        out = []
        recorded = uplan.load_state(uplan.state_path(self.spec_path))
        running = upgrade.running_version(self.spec, recorded) if self.spec.kraft_mode else None
        self.upgrade_start = running
        for i, u in ups:
            to = self._upgrade_target(u, built)
            if running is not None:
                uplan.check_upgrade(self.spec, running, to, built)
                if to == running:
                    raise uplan.UpgradeRefused(f"step {i} (upgrade): cluster {self.spec.name} runs {to} already")
            else:
                uplan.check_built(to, built)
            out.append(f"step {i}: roll every node from {running or 'the migrated cluster'} to {to}"
                       + (", then finalize" if u.finalize else ""))  # fmt: skip
            running = to
        return out

    def _upgrade_target(self, u: Upgrade, built: list[str]) -> str:
        if u.to == "start":
            if self.upgrade_start is None:
                raise UsageError("upgrade to start: the cluster ran no KRaft version as the drill began")
            return self.upgrade_start
        if u.to != "newest":
            return u.to
        if not built:
            raise UsageError("upgrade to newest: no clusterctl/kafka image is built here (`clusterctl images build`)")
        return built[-1]

    def _step_upgrade(self, u: Upgrade) -> str:
        from clusterctl.runtime import upgrade
        from clusterctl.spec.kafkadist import built_versions

        if self.spec_path is None:
            raise UsageError("upgrade: the runner was given no spec file")
        to = self._upgrade_target(u, built_versions())
        result = upgrade.upgrade(
            self.spec_path, to, yes=u.finalize, timeout=u.timeout, until=u.until,
            progress=lambda m: self.progress(f"  {m}"),
            on_node=lambda service, done: self.observer.phase(f"{service} to {to}", done),
        )  # fmt: skip
        self._follow_spec()
        rolled = ", ".join(f"{r.service} {r.seconds:.1f}s" for r in result.ran if r.restarted)
        fin = f"; finalized {result.finalized}, metadata.version {result.metadata_level}" if result.finalized else ""
        return f"{result.from_version} → {to}: {rolled or 'no node restarted'}{fin}"

    def _step_migrate(self, m: Migrate) -> str:
        from clusterctl.runtime import migrate

        if self.spec_path is None:
            raise UsageError("migrate: the runner was given no spec file")

        def said(message: str) -> None:
            self.progress(f"  {message}")

        if m.to == "zookeeper":
            self.observer.phase("rollback", False)
            back = migrate.rollback(self.spec_path, timeout=m.timeout, progress=said)
            self.observer.phase("rollback", True)
            return f"rolled back from phase {back.reverted_from} in {back.seconds:.1f}s: {'; '.join(back.steps)}"
        result = migrate.migrate(
            self.spec_path,
            to=None if m.until_phase is None else str(m.until_phase),
            yes=True,
            timeout=m.timeout,
            progress=said,
            on_phase=lambda p, done: self.observer.phase(f"{p.number} {p.name}", done),
        )
        self._follow_spec()
        ran = ", ".join(f"{r.number} {r.name} {r.seconds:.1f}s" for r in result.ran)
        return f"phases {ran}" if ran else "nothing to do: the migration was there already"

    def _follow_spec(self) -> None:
        """After phase 5 the spec file is a kraft spec, after an upgrade it names the new version: heal and
        conditions from here on use it."""
        from clusterctl.spec.model import load_spec

        assert self.spec_path is not None
        now = load_spec(self.spec_path)
        if (now.kraft_mode and not self.spec.kraft_mode) or now.kafka.version != self.spec.kafka.version:
            self.spec = now
            self.cond.spec = now

    def _step_consume(self, c: Consume) -> str:
        from clusterctl.kafka.clients import consume

        group = c.group or f"drill-{self.sc.name}-{self.run_id}"
        topic = c.topic or self.topic
        read = sum(1 for _ in consume(self.bootstrap, topic, group=group, max_messages=c.max_messages,
                                      timeout=c.timeout, group_protocol=c.group_protocol))  # fmt: skip
        if read == 0:
            raise VerificationError(f"consume: group {group} read nothing from {topic} in {c.timeout:g}s")
        how = " (consumer protocol)" if c.group_protocol == "consumer" else ""
        return f"group {group}{how} read {read} records of {topic} and committed them"

    def _step_snapshot(self, s: Snapshot) -> str:
        from clusterctl.chaos.snapshot import differences, take_snapshot
        from clusterctl.wait import wait_until

        snap = wait_until(
            lambda: take_snapshot(self.bootstrap, s.name),
            timeout=SNAPSHOT_TIMEOUT_S,
            what=f"snapshot {s.name} (topics, configs, group offsets)",
            retry_on=lambda exc: isinstance(exc, ClusterctlError),
        )
        self.snapshots[s.name] = snap
        if s.same_as is None:
            return snap.summary()
        diff = differences(self.snapshots[s.same_as], snap)
        if diff:
            raise VerificationError(
                f"snapshot {s.name} differs from {s.same_as} ({len(diff)} difference{'s' if len(diff) > 1 else ''}): "
                + "; ".join(diff[:5])
                + ("; ..." if len(diff) > 5 else "")
            )
        return f"{snap.summary()}; identical to {s.same_as}"
