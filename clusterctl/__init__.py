"""clusterctl: stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker."""

from pathlib import Path

__version__ = "0.1.0"

# the spec and compose templates and the image build contexts (package data: a link to the repository's templates/)
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
