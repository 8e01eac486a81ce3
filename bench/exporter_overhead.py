#!/usr/bin/env python3
"""Benchmark: what the Prometheus JMX exporter agent (monitoring.enabled) costs a broker's produce throughput.

One ZooKeeper + one broker from clusterctl's Maven-assembled Kafka (bench/perf_vs_java.py's LocalKafka, on
loopback), started afresh for every run, with the agent (the jar `clusterctl up` fetches, our rule file
templates/monitoring/jmx-exporter.yaml, scraped once a second during the run as Prometheus would) or without it,
alternately (the order rotated each round), `--runs` rounds (default 3). Each run: kafka-producer-perf-test.sh
flat out, acks=1, a fresh 1-partition topic. Prints each run and the medians, and the difference in percent;
the acceptance is at most 3 %.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COLUMNS", "170")

from java_runs import fresh_topic, kafka_home, rotated  # noqa: E402
from perf_vs_java import LocalKafka, run_java  # noqa: E402

from clusterctl import TEMPLATES_DIR  # noqa: E402
from clusterctl.images.jmx_exporter import ensure_agent  # noqa: E402
from clusterctl.images.kafka_maven import DEFAULT_KAFKA_VERSION  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.spec.monitoring import JMX_EXPORTER_VERSION, RULES_FILE  # noqa: E402
from clusterctl.testing.tansu import free_port  # noqa: E402

RULES = TEMPLATES_DIR / "monitoring" / RULES_FILE


class MonitoredKafka(LocalKafka):
    """LocalKafka whose broker JVM (only) loads the agent on a loopback port."""

    def __init__(self, home: Path, work: Path, agent: Path) -> None:
        super().__init__(home, work)
        self.agent, self.exporter_port = agent, free_port()

    def _start(self, script: str, props: Path, log: str, opts: str = "") -> None:
        if script == "kafka-server-start.sh":
            opts = f"{opts} -javaagent:{self.agent}=127.0.0.1:{self.exporter_port}:{RULES}".strip()
        super()._start(script, props, log, opts)


def scraping(url: str, stop: threading.Event, counted: list[int]) -> None:
    """GET the exporter once a second until `stop`; counts the answers."""
    while not stop.wait(1.0):
        with urllib.request.urlopen(url, timeout=5) as resp:
            resp.read()
        counted[0] += 1


def one_run(home: Path, agent: Path | None, args: argparse.Namespace, seq: int) -> tuple[float, int]:
    """A fresh broker (with `agent` or without), one producer run: its records/s and how many scrapes it saw."""
    with tempfile.TemporaryDirectory(prefix="clusterctl-exporter-bench-") as tmp:
        kafka = MonitoredKafka(home, Path(tmp), agent) if agent else LocalKafka(home, Path(tmp))
        kafka.start()
        stop, counted = threading.Event(), [0]
        try:
            with fresh_topic(kafka.bootstrap, f"overhead-{seq}", 1, 1) as topic:
                if isinstance(kafka, MonitoredKafka):
                    url = f"http://127.0.0.1:{kafka.exporter_port}/metrics"
                    threading.Thread(target=scraping, args=(url, stop, counted), daemon=True).start()
                summary = run_java(home, kafka.bootstrap, topic, args.record_size, args.records)
        finally:
            stop.set()
            kafka.stop()
    return summary["rps"], counted[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds; each runs both variants (default 3)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("--agent-version", default=JMX_EXPORTER_VERSION)
    args = parser.parse_args()
    agent = ensure_agent(args.agent_version)
    with tempfile.TemporaryDirectory(prefix="clusterctl-exporter-bench-") as work:
        home, source = kafka_home(Path(work), args.kafka_version)
        info(f"Kafka: {source}; agent {agent.name}; {args.records} x {args.record_size} B, acks=1, {args.runs} rounds")
        rows: list[dict[str, object]] = []
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for seq, (i, variant) in enumerate(rotated(("off", "on"), args.runs), 1):
            started = time.monotonic()
            rps, scrapes = one_run(home, agent if variant == "on" else None, args, seq)
            rates[variant].append(rps)
            rows.append({"round": i + 1, "agent": variant, "records_per_s": rps, "scrapes": scrapes,
                         "seconds": round(time.monotonic() - started, 1)})  # fmt: skip
            info(f"round {i + 1} agent {variant}: {rps:.0f} records/s ({scrapes} scrapes)")
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    diff = (off - on) / off * 100
    columns = [Column(h, f) for h, f in (("Round", "round"), ("Agent", "agent"), ("Records/s", "records_per_s"),
                                          ("Scrapes", "scrapes"), ("Seconds", "seconds"))]  # fmt: skip
    emit(rows, as_json=False, columns=columns, title="produce throughput, with and without the JMX exporter agent")
    info(f"median records/s: without {off:.0f}, with {on:.0f}: {diff:+.1f} % cost (acceptance <= 3 %)")
    return 0 if diff <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
