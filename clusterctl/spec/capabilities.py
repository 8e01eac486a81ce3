"""What an Apache Kafka version supports: the one table spec validation, `init`, `migrate`, `scenario compare`
and `clusterctl versions` ask.

Each feature is a list of stages by release line (major, minor), from Kafka's own documentation:
- ZooKeeper mode: every release before 4.0 (4.0 removed it; 4.x upgrade notes).
- KRaft: production-ready from 3.3 (the 4.x upgrade notes: "the first version when KRaft mode was deemed
  production ready"); early access 2.8-3.2.
- ZooKeeper → KRaft migration (KIP-866): early access in 3.4, preview in 3.5, production-ready from 3.6
  (operations/zookeeper of 3.5 and 3.6); none on 4.x (no ZooKeeper). `clusterctl migrate kraft` itself starts
  from 3.7 (MIGRATE_KRAFT_FROM: the first release the Kafka project and vendors advise for production).
- Dynamic controller quorum (KIP-853): 3.9 (the compatibility page: a 3.9 cluster is the first with dynamic voters).
- Eligible Leader Replicas (KIP-966 part 1): 4.0, off by default (eligible.leader.replicas.version=1 turns it on);
  on for new clusters from 4.1 (operations/eligible-leader-replicas).
- The consumer group protocol (KIP-848): early access 3.7, preview 3.8, generally available and on by default on
  the broker from 4.0 (operations/consumer-rebalance-protocol; clients opt in with group.protocol=consumer).
- Java for the broker: 8+ on 3.x (8 deprecated since 3.0, 11 for brokers since 3.7), 17+ on 4.x (compatibility page).
The offline images run OpenJDK 17 (templates/images/base/packages.txt), which every line here accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

Line = tuple[int, int]

FIRST_VERSION_WITHOUT_ZOOKEEPER: Line = (4, 0)
KRAFT_PRODUCTION_FROM: Line = (3, 3)
MIGRATE_KRAFT_FROM: Line = (3, 7)  # `clusterctl migrate kraft` (kafka/kraft/migration.py)
MIGRATION_LINE = "3.9"  # the last line with ZooKeeper mode: where a ZooKeeper cluster migrates before 4.x
# the release lines this table knows (`clusterctl versions --all`): KRaft-ready 3.3 up to the newest on Maven Central
KNOWN_LINES: tuple[Line, ...] = (*((3, m) for m in range(3, 10)), *((4, m) for m in range(0, 5)))

YES = "yes"
NO = "no"


@dataclass(frozen=True)
class Feature:
    name: str  # the field name in `versions --json`
    title: str  # the column header
    stages: tuple[tuple[Line | None, Line | None, str], ...]  # [from, until) -> status; "no" outside every stage

    def status(self, line: Line) -> str:
        for start, until, status in self.stages:
            if (start is None or line >= start) and (until is None or line < until):
                return status
        return NO


FEATURES: tuple[Feature, ...] = (
    Feature("zookeeper_mode", "ZooKeeper mode", ((None, FIRST_VERSION_WITHOUT_ZOOKEEPER, YES),)),
    Feature("kraft", "KRaft", (((2, 8), KRAFT_PRODUCTION_FROM, "early access"), (KRAFT_PRODUCTION_FROM, None, YES))),
    Feature(
        "zk_migration",
        "ZK->KRaft migration (KIP-866)",
        (
            ((3, 4), (3, 5), "early access"),
            ((3, 5), (3, 6), "preview"),
            ((3, 6), MIGRATE_KRAFT_FROM, "yes (clusterctl: 3.7+)"),
            (MIGRATE_KRAFT_FROM, FIRST_VERSION_WITHOUT_ZOOKEEPER, YES),
        ),
    ),
    Feature("dynamic_quorum", "Dynamic quorum (KIP-853)", (((3, 9), None, YES),)),
    Feature(
        "elr",
        "ELR (KIP-966)",
        (((4, 0), (4, 1), "yes, off by default"), ((4, 1), None, "yes, on for new clusters")),
    ),
    Feature(
        "group_protocol",
        "Consumer group protocol (KIP-848)",
        (((3, 7), (3, 8), "early access"), ((3, 8), (4, 0), "preview"), ((4, 0), None, YES)),
    ),
    Feature(
        "java",
        "Java (broker)",
        ((None, FIRST_VERSION_WITHOUT_ZOOKEEPER, "8+"), (FIRST_VERSION_WITHOUT_ZOOKEEPER, None, "17+")),
    ),
)
FEATURE_NAMES = tuple(f.name for f in FEATURES)


def line_of(version: str | Line) -> Line:
    """'3.9.2', '3.9', '3.9.x' or (3, 9) -> (3, 9); ValueError for anything else."""
    if isinstance(version, tuple):
        return version[0], version[1]
    parts = version.strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"{version!r} is not a Kafka version")
    return int(parts[0]), int(parts[1])


def supports(version: str | Line, feature: str) -> str:
    """The status of `feature` (one of FEATURE_NAMES) on `version`: yes, no, early access, preview, ..."""
    line = line_of(version)
    for f in FEATURES:
        if f.name == feature:
            return f.status(line)
    raise KeyError(feature)


def capabilities(version: str | Line) -> dict[str, str]:
    """Every feature's status on `version`, in FEATURES' order."""
    line = line_of(version)
    return {f.name: f.status(line) for f in FEATURES}


def zookeeper_capable(version: str | Line) -> bool:
    """Whether `version` has ZooKeeper mode (every release before 4.0)."""
    return line_of(version) < FIRST_VERSION_WITHOUT_ZOOKEEPER


def kraft_ready(version: str | Line) -> bool:
    """Whether `version` runs KRaft in production (3.3+)."""
    return supports(version, "kraft") == YES


def no_zookeeper_mode(subject: str, fix: str) -> str:
    """The one line that refuses ZooKeeper mode on a 4.x Kafka: `subject` ("image X is Kafka 4.4"), what to do
    instead (`fix`), and the way a ZooKeeper cluster gets to 4.x."""
    return (
        f"{subject}, which has no ZooKeeper mode (Kafka 4.0 removed it): {fix}; a ZooKeeper cluster gets to 4.x "
        f"by `clusterctl migrate kraft` on Kafka {MIGRATION_LINE} first"
    )
