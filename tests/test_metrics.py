"""monitoring (spec, render) and `clusterctl metrics` without a cluster: the spec's checks, what the compose file
gains (and does not), and the domain call against exporters served on loopback (a real HTTP server of the text
format our rule file produces; tests/test_metrics_kafka.py reads the real agent)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose.render import render, render_compose
from clusterctl.errors import SpecError
from clusterctl.kafka import metrics
from clusterctl.spec.model import parse_spec
from clusterctl.spec.monitoring import AGENT_MOUNT, RULES_FILE, ExporterTarget, exporter_targets

KRAFT: dict[str, Any] = {
    "profile": "offline",
    "kafka": {"mode": "kraft", "version": "4.4.0", "defaults": {"replication_factor": 3, "min_insync_replicas": 2}},
    "kraft": {"controllers": 3},
    "kafka_manager": {"enabled": False},
}


def spec_with(monitoring: dict[str, Any], base: dict[str, Any] | None = None) -> Any:
    return parse_spec({**(base or KRAFT), "monitoring": monitoring})


def test_off_by_default_and_off_renders_nothing_new() -> None:
    off = parse_spec(KRAFT)
    assert off.monitoring.enabled is False
    text = render_compose(off)
    assert "javaagent" not in text and "KAFKA_JMX_OPTS" not in text
    assert render_compose(spec_with({"enabled": False, "exporter_port": 7072})) == text


@pytest.mark.parametrize(
    ("base", "monitoring", "message"),
    [
        ({"profile": "default"}, {"enabled": True}, "needs profile offline"),
        ({**KRAFT, "kafka": {**KRAFT["kafka"], "jmx_port": None}}, {"enabled": True}, "needs kafka.jmx_port"),
        (KRAFT, {"enabled": True, "exporter_port": 9999}, "clashes with kafka.jmx_port"),
        (KRAFT, {"enabled": True, "exporter_port": 19092}, "clashes with kafka.internal_port"),
        (KRAFT, {"enabled": True, "exporter_port": 1023}, "monitoring.exporter_port"),
        (KRAFT, {"enabled": True, "exporter_port": 65536}, "monitoring.exporter_port"),
        (KRAFT, {"enabled": True, "exporter_version": "latest"}, "monitoring.exporter_version"),
        (KRAFT, {"enabled": "yes"}, "monitoring.enabled"),
    ],
)
def test_bad_monitoring_is_one_line(base: dict[str, Any], monitoring: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        spec_with(monitoring, base)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mode", ["kraft", "zookeeper"])
def test_enabled_loads_the_agent_in_every_kafka_node_and_publishes_nothing(mode: str, tmp_path: Path) -> None:
    base = KRAFT if mode == "kraft" else {"profile": "offline", "kafka_manager": {"enabled": False}}
    spec = spec_with({"enabled": True}, base)
    off = yaml.safe_load(render_compose(parse_spec(base)))
    on = yaml.safe_load(render_compose(spec))
    kafka_nodes = [s for s in on["services"] if s.startswith(("kafka", "controller"))]
    assert len(kafka_nodes) == (6 if mode == "kraft" else 3)
    for name in kafka_nodes:
        svc = on["services"][name]
        assert f"-javaagent:{AGENT_MOUNT}=0.0.0.0:7071:" in svc["environment"]["KAFKA_JMX_OPTS"]
        assert svc["environment"]["KAFKA_JMX_PORT"] == "9999"
        assert f"./{RULES_FILE}:/etc/clusterctl/jmx-exporter.yaml:ro" in svc["volumes"]
        assert svc.get("ports") == off["services"][name].get("ports")  # nothing new published
    assert all("KAFKA_JMX_OPTS" not in on["services"][s]["environment"] for s in on["services"] if "zk" in s)
    assert on["volumes"] == off["volumes"]  # binds, not named volumes
    result = render(spec, tmp_path / "out", validate=False)
    rules = yaml.safe_load((tmp_path / "out" / RULES_FILE).read_text())
    assert str(tmp_path / "out" / RULES_FILE) in result.files
    names = " ".join(r["name"] for r in rules["rules"])
    for metric in ("replicamanager_$1", "kafkacontroller_$1", "brokertopicmetrics_$1_total", "requests_total"):
        assert metric in names


def test_targets_are_the_nodes_ips_and_refused_when_off() -> None:
    spec = spec_with({"enabled": True, "exporter_port": 7100})
    found = exporter_targets(spec)
    assert [(t.node_id, t.role) for t in found] == [(1, "broker"), (2, "broker"), (3, "broker")] + [
        (c, "controller") for c in (101, 102, 103)
    ]
    assert found[0].url == f"http://{spec.topology.broker_ip(1)}:7100/metrics"
    assert [t.node_id for t in metrics.targets(spec, broker=2)] == [2]
    with pytest.raises(SpecError, match="no broker 101"):
        metrics.targets(spec, broker=101)
    with pytest.raises(SpecError, match="monitoring is off"):
        metrics.targets(parse_spec(KRAFT))


BODY = """# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions {urp}
kafka_server_replicamanager_underminisrpartitioncount 1.0
kafka_server_replicamanager_leadercount 4.0
kafka_server_replicamanager_partitioncount 9.0
# TYPE kafka_server_replicamanager_isrshrinks_total counter
kafka_server_replicamanager_isrshrinks_total {shrinks}
kafka_server_replicamanager_isrexpands_total 0.0
kafka_server_brokertopicmetrics_bytesin_total {bytes_in}
kafka_server_brokertopicmetrics_bytesout_total 0.0
kafka_network_requestmetrics_requests_total{{request="Produce",version="9"}} {produce}
kafka_network_requestmetrics_requests_total{{request="Produce",version="11"}} {produce}
kafka_network_requestmetrics_totaltimems{{quantile="0.99",request="Produce"}} 12.5
kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent 0.75
"""


@pytest.fixture
def exporter() -> Iterator[tuple[ExporterTarget, dict[str, float]]]:
    """One exporter on loopback whose values the test changes between scrapes."""
    values = {"urp": 0.0, "shrinks": 0.0, "bytes_in": 0.0, "produce": 0.0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = BODY.format(**values).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        yield ExporterTarget(2, "broker", "kafka2", url), values
    finally:
        server.shutdown()
        server.server_close()


def test_gauges_rates_and_the_line_that_says_what_is_wrong(exporter: tuple[ExporterTarget, dict[str, float]]) -> None:
    target, values = exporter
    before = metrics.scrape(target)
    values |= {"urp": 12.0, "shrinks": 6.0, "bytes_in": 2e6, "produce": 50.0}
    now = metrics.scrape(target)
    node = metrics.node_health(now, before)
    dt = now.at - before.at
    assert (node.under_replicated, node.under_min_isr, node.leaders, node.partitions) == (12, 1, 4, 9)
    assert node.isr_shrinks_per_s == pytest.approx(6.0 / dt) and node.bytes_in_per_s == pytest.approx(2e6 / dt)
    assert node.produce_requests_per_s == pytest.approx(100.0 / dt)  # summed over the request's versions
    assert (node.produce_p99_ms, node.handler_idle, node.offline_partitions) == (12.5, 0.75, None)
    (line,) = metrics.problems([node])
    assert line.startswith("broker 2: 12 under-replicated partitions, 1 under min ISR, ISR shrinks ")
    assert metrics.node_health(now, None).isr_shrinks_per_s is None  # one scrape: no rate


def test_a_node_that_does_not_answer_is_kept_with_its_error() -> None:
    gone = ExporterTarget(3, "broker", "kafka3", "http://127.0.0.1:1/metrics")
    (scrape,) = metrics.scrape_all([gone], timeout=1.0)
    node = metrics.node_health(scrape, None)
    assert node.error is not None and node.error.startswith("kafka3 exporter did not answer")
    assert node.under_replicated is None
    assert metrics.problems([node]) == [f"broker 3: {node.error}"]
