"""Image profiles: which images a cluster runs and how configuration reaches them.

Every profile's images honour the same env contracts, so one set of templates serves all of them:
ZooKeeper follows the official `zookeeper` image (ZOO_MY_ID, ZOO_SERVERS, ...), Kafka follows Confluent
cp-kafka (KAFKA_X_Y -> x.y in server.properties). The offline images are built locally by
`clusterctl images build` (clusterctl/images/build.py builds exactly the names below).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from clusterctl.spec.kafkadist import OFFLINE_KAFKA_REPO

# Offline image names; clusterctl/images/build.py builds these (tests/test_render.py checks they agree).
OFFLINE_ZOOKEEPER_IMAGE = "clusterctl/zookeeper:3.8.0"
# The Kafka image is tagged with its Kafka's version (clusterctl/kafka:3.9.2, built from Maven Central); the profile
# names the repository and spec.broker_image resolves the tag (kafka.version, else clusterctl/spec/kafkadist.py).
OFFLINE_KAFKA_IMAGE = OFFLINE_KAFKA_REPO
OFFLINE_TANSU_IMAGE = "clusterctl/tansu:0.6.0"
# Apache's official image: the newest 4.x release we know (Kafka 4.0 removed ZooKeeper mode: KRaft only)
APACHE_KAFKA_VERSION = "4.4.0"
APACHE_KAFKA_REPO = "apache/kafka"
APACHE_KAFKA_IMAGE = f"{APACHE_KAFKA_REPO}:{APACHE_KAFKA_VERSION}"
# KIP-975: Apache publishes apache/kafka from 3.7.0 on (docker/ in apache/kafka); no earlier tag exists
APACHE_FIRST_VERSION = (3, 7)
# clusterctl's web console as the kafka-manager service (kafka_manager.kind: console), built by
# `clusterctl images build console` in every profile (no registry carries it)
CONSOLE_IMAGE = "clusterctl/console:0.1.0"
ManagerKind = Literal["cmak", "console"]
# Spark master/worker images must run the driver's Spark version: the PySpark installed with clusterctl
# (tests/test_images.py checks these tags against it).
SPARK_VERSION = "4.2.0"
OFFLINE_SPARK_IMAGE = f"clusterctl/spark:{SPARK_VERSION}"
# Spark's Kafka connector (Maven Central) and its compile dependencies that PySpark's own jars already hold (same
# versions): a driver's spark.jars.packages and the spark image's Maven resolution both leave them out
SPARK_KAFKA_CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
SPARK_CONNECTOR_PROVIDED = (
    ("org.apache.hadoop", "hadoop-client-runtime"),
    ("org.apache.hadoop", "hadoop-client-api"),
    ("at.yawk.lz4", "lz4-java"),
    ("org.lz4", "lz4-java"),
    ("org.xerial.snappy", "snappy-java"),
    ("org.slf4j", "slf4j-api"),
    ("com.google.code.findbugs", "jsr305"),
    ("org.scala-lang.modules", "scala-parallel-collections_2.13"),
)
PUBLISHED_SPARK_IMAGE = f"apache/spark:{SPARK_VERSION}-python3"

BASE_IMAGE = "clusterctl/base:bookworm"
# target name -> image (kafka: the repository; its tag is the distribution's version); the base is implied
TARGETS: dict[str, str] = {
    "base": BASE_IMAGE,
    "zookeeper": OFFLINE_ZOOKEEPER_IMAGE,
    "kafka": OFFLINE_KAFKA_IMAGE,
    "tansu": OFFLINE_TANSU_IMAGE,
    "spark": OFFLINE_SPARK_IMAGE,
    "console": CONSOLE_IMAGE,
}


def build_hint(names: Iterable[str]) -> str:
    """The `images build` command that would produce the given images."""
    wanted = set(names)
    targets = [t for t, img in TARGETS.items() if img in wanted or (t == "kafka" and any(map(is_kafka_image, wanted)))]
    cmd = "clusterctl images build " + " ".join(targets)
    versions = sorted({n.rpartition(":")[2] for n in wanted if is_kafka_image(n)} - {"unbuilt"})
    if len(versions) == 1:  # Kafka from Maven Central; clusterctl/kafka:unbuilt = the default line
        cmd += f" --kafka-version {versions[0]}"
    return cmd


def is_kafka_image(name: str) -> bool:
    """A clusterctl/kafka:<version> image (built here from Maven Central or a distribution)."""
    return name.startswith(OFFLINE_KAFKA_IMAGE + ":")


def ours(name: str) -> bool:
    """An image `clusterctl images build` makes."""
    return name in TARGETS.values() or is_kafka_image(name)


# How configuration reaches the broker image (clusterctl/compose/contracts.py derives the file each one writes):
#   "cp"           Confluent cp-kafka's contract (also clusterctl/kafka): KAFKA_X_Y -> x.y, and KAFKA_JMX_PORT is
#                  exported as JMX_PORT for the broker process only.
#   "wurstmeister" wurstmeister/kafka's start-kafka.sh (since 2018 it derives no listener itself): it copies
#                  every KAFKA_* variable verbatim into the distribution's server.properties (KAFKA_FOO_BAR ->
#                  foo.bar, no escapes), so the INTERNAL and EXTERNAL listeners are rendered exactly as for cp;
#                  it reads a global JMX_PORT, so the compose command sets it inline for the broker process only.
#   "apache"       Apache's official apache/kafka image (docker/ in apache/kafka): KafkaDockerWrapper maps
#                  KAFKA_X_Y -> x.y with cp's escapes (so the same environment serves), KRaft only; its launch
#                  script exports KAFKA_JMX_PORT as JMX_PORT like cp-kafka's.
BrokerFlavor = Literal["cp", "wurstmeister", "apache"]


@dataclass(frozen=True)
class ImageProfile:
    name: str
    description: str
    zookeeper: str
    kafka: str
    tansu: str
    kafka_manager: str | None  # None: the profile has no CMAK image
    manager_kind: ManagerKind = "cmak"  # kafka_manager.kind when the spec does not say (kraft mode: console)
    spark: str = PUBLISHED_SPARK_IMAGE  # master and workers (spark.enabled); the image has /opt/spark
    broker_flavor: BrokerFlavor = "cp"
    kafka_data_dir: str = "/var/lib/kafka/data"
    kafka_volume_mount: str = "/var/lib/kafka/data"
    broker_start_command: str | None = None  # the image's start script (wurstmeister flavour)
    tansu_healthcheck: bool = True  # the image has bash for a /dev/tcp check
    zk_data_dir: str = "/data"
    zk_datalog_dir: str = "/datalog"


PROFILES: dict[str, ImageProfile] = {
    "default": ImageProfile(
        name="default",
        description="published images: zookeeper:3.8, Confluent cp-kafka 7.9 (Kafka 3.9, ZK mode), CMAK",
        zookeeper="zookeeper:3.8",
        kafka="confluentinc/cp-kafka:7.9.1",
        tansu="ghcr.io/tansu-io/tansu:0.6.0",
        kafka_manager="hlebalbau/kafka-manager:stable",
        tansu_healthcheck=False,
    ),
    "wurstmeister": ImageProfile(
        name="wurstmeister",
        description="the seed's broker image wurstmeister/kafka (Kafka 2.8.1, ZK mode) with zookeeper:3.8 and CMAK "
        "3 (hlebalbau/kafka-manager, as in default: the seed's sheepkiller/kafka-manager is 1.3.1.8 from 2016 "
        "and knows Kafka up to 0.9)",
        zookeeper="zookeeper:3.8",
        kafka="wurstmeister/kafka:2.13-2.8.1",
        tansu="ghcr.io/tansu-io/tansu:0.6.0",
        kafka_manager="hlebalbau/kafka-manager:stable",
        broker_flavor="wurstmeister",
        kafka_data_dir="/kafka/kafka-logs",
        kafka_volume_mount="/kafka",
        broker_start_command="start-kafka.sh",
        tansu_healthcheck=False,
    ),
    "offline": ImageProfile(
        name="offline",
        description="images built here with no pull (`clusterctl images build`); clusterctl's console, no CMAK",
        zookeeper=OFFLINE_ZOOKEEPER_IMAGE,
        kafka=OFFLINE_KAFKA_IMAGE,
        tansu=OFFLINE_TANSU_IMAGE,
        kafka_manager=None,
        manager_kind="console",
        spark=OFFLINE_SPARK_IMAGE,
    ),
    "apache": ImageProfile(
        name="apache",
        description=f"Apache's official {APACHE_KAFKA_IMAGE} (KRaft only: 3 controllers + 3 brokers, or combined); "
        "clusterctl's console as kafka-manager",
        zookeeper="zookeeper:3.8",  # never rendered: ZooKeeper mode is refused with this profile
        kafka=APACHE_KAFKA_IMAGE,
        tansu="ghcr.io/tansu-io/tansu:0.6.0",
        kafka_manager=None,
        manager_kind="console",
        broker_flavor="apache",
        tansu_healthcheck=False,
    ),
}


_TAG_VERSION = re.compile(r"^(?:\d+\.\d+-)?(\d+)\.(\d+)")  # 3.9.0, 3.9, 2.13-2.8.1 (scala-kafka)


def kafka_version_of(image: str) -> tuple[int, int] | None:
    """The Apache Kafka (major, minor) a broker image runs, read from its tag; None when the tag does not say.

    Confluent Platform tags count differently: cp-kafka / cp-server 7.x ship Kafka 3.x, 8.x ship Kafka 4.x.
    """
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag or ("kafka" not in name.rsplit("/", 1)[-1] and "cp-server" not in name):
        return None
    m = _TAG_VERSION.match(tag)
    if m is None:
        return None
    major, minor = int(m.group(1)), int(m.group(2))
    if name.rsplit("/", 1)[-1] in ("cp-kafka", "cp-server"):
        if major == 6:
            return 2, minor + 6  # cp 6.0-6.2: Kafka 2.6-2.8
        return (major - 4, minor) if major >= 7 else None
    return major, minor


def apache_image(version: str) -> str:
    """Apache's official image of one Kafka release (profile apache with kafka.version)."""
    return f"{APACHE_KAFKA_REPO}:{version}"


def check_apache_version(version: str) -> None:
    """Refuse a kafka.version that has no apache/kafka image (ValueError: the spec check's one line)."""
    parsed = kafka_version_of(apache_image(version))
    if parsed is None or parsed < APACHE_FIRST_VERSION:
        first = ".".join(map(str, APACHE_FIRST_VERSION))
        raise ValueError(
            f"kafka.version {version}: Apache publishes {APACHE_KAFKA_REPO} images from {first}.0 on (KIP-975); "
            f"use {first}.0 or later, or profile offline"
        )
