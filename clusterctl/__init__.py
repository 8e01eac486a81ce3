"""clusterctl: stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker."""

__version__ = "0.1.0"
