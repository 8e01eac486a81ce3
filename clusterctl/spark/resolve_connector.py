"""The resolving driver of `clusterctl spark prepare` (packages.resolve runs it as a child process): a driver
started with the connector's configuration, so Spark's own resolution fills the cache, then a check that the
connector's class loads."""

from __future__ import annotations

from clusterctl.errors import ClusterctlError
from clusterctl.spark import session
from clusterctl.spark.packages import CONNECTOR_CLASS, connector_conf, connector_package


def resolve_here() -> None:
    spark = session.get_session("local[1]", "clusterctl-resolve-connector", connector_conf())
    try:
        if not session.has_builtin_kafka(spark):
            raise SystemExit(f"{CONNECTOR_CLASS} did not load after resolving {connector_package()}")
    finally:
        spark.stop()


if __name__ == "__main__":
    try:
        resolve_here()
    except ClusterctlError as exc:
        raise SystemExit(str(exc)) from None
