"""Testing helpers for users' CI: `KafkaCluster` (a throwaway cluster with faults) and the pytest plugin.

Imports are lazy: pytest loads the plugin (clusterctl.testing.plugin) in every session of an environment
where clusterctl is installed, so nothing heavy may be imported until a fixture is actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.testing.drill import Drill
    from clusterctl.testing.kafka_cluster import ClusterUnavailable, KafkaCluster

__all__ = ["ClusterUnavailable", "Drill", "KafkaCluster"]


def __getattr__(name: str) -> Any:
    if name in ("KafkaCluster", "ClusterUnavailable"):
        from clusterctl.testing import kafka_cluster

        return getattr(kafka_cluster, name)
    if name == "Drill":
        from clusterctl.testing.drill import Drill

        return Drill
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
