"""Kafka's and ZooKeeper's own start-up rules, applied to derived config files (clusterctl.compose.contracts).

Each rule is one that KafkaConfig / QuorumPeerConfig enforces when the server starts (it refuses to start, or
starts into a cluster that cannot form), plus reachability on the compose network: what a broker advertises
for inter-broker traffic must be its own service name, so the other containers reach it.
"""

from __future__ import annotations

from collections import Counter

from clusterctl.compose.contracts import NodeConfig

PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}


def listeners(value: str) -> list[tuple[str, str, int]]:
    """NAME://host:port entries as (NAME, host, port); a port that is not a number is -1."""
    out = []
    for entry in filter(None, (e.strip() for e in value.split(","))):
        name, _, rest = entry.partition("://")
        host, _, port = rest.rpartition(":")
        out.append((name.upper(), host, int(port) if port.isdigit() else -1))
    return out


def _protocol_map(props: dict[str, str]) -> dict[str, str]:
    raw = props.get("listener.security.protocol.map")
    if raw is None:  # Kafka's default maps every protocol name to itself
        return {p: p for p in PROTOCOLS}
    return dict(tuple(part.split(":", 1)) for part in raw.split(",") if ":" in part)  # type: ignore[misc]


def check_listeners(node: NodeConfig) -> list[str]:
    """Listener names, protocols, advertised listeners and the inter-broker listener of one Kafka node."""
    p, who = node.properties, node.service
    problems: list[str] = []
    own = listeners(p.get("listeners", ""))
    names = [n for n, _, _ in own]
    if not own:
        problems.append(f"{who}: no listeners")
    problems += [f"{who}: listener name {n} appears twice" for n, c in Counter(names).items() if c > 1]
    problems += [f"{who}: listener {n}://{h}:{port} has no valid port" for n, h, port in own if port <= 0]
    ports = Counter(port for _, _, port in own)
    problems += [f"{who}: port {port} is used by two listeners" for port, c in ports.items() if c > 1]
    pmap = _protocol_map(p)
    problems += [f"{who}: listener {n} has no security protocol" for n in names if pmap.get(n) not in PROTOCOLS]
    roles = set(p.get("process.roles", "broker").split(","))
    controller_names = set(filter(None, p.get("controller.listener.names", "").upper().split(",")))
    if "broker" not in roles:
        return problems
    advertised = listeners(p.get("advertised.listeners", p.get("listeners", "")))
    adv_names = [n for n, _, _ in advertised]
    problems += [f"{who}: advertised listener {n} is not a listener" for n in adv_names if n not in names]
    problems += [f"{who}: advertises the non-routable 0.0.0.0 ({n})" for n, h, _ in advertised if h == "0.0.0.0"]
    problems += [f"{who}: advertises controller listener {n}" for n in adv_names if n in controller_names]
    inter = p.get("inter.broker.listener.name", "PLAINTEXT").upper()
    if inter not in adv_names:
        problems.append(f"{who}: inter.broker.listener.name {inter} is not an advertised listener")
    else:
        _, host, port = next(a for a in advertised if a[0] == inter)
        if host != who:
            problems.append(f"{who}: advertises {inter} as {host!r}, which other containers cannot reach as {who}")
        if port not in [lp for n, _, lp in own if n == inter]:
            problems.append(f"{who}: advertises {inter} on port {port}, but listens on another")
    return problems


def check_kraft(nodes: list[NodeConfig]) -> list[str]:
    """process.roles, node.id, controller listener and quorum voters (or, for a dynamic quorum, its bootstrap
    servers) across every KRaft node."""
    problems, controllers = _check_roles(nodes)
    if any("controller.quorum.bootstrap.servers" in n.properties for n in nodes):
        return problems + _check_dynamic(nodes, controllers)
    voters_seen = {n.properties.get("controller.quorum.voters") for n in nodes}
    if len(voters_seen) != 1 or None in voters_seen:
        problems.append(f"controller.quorum.voters differ or are missing: {sorted(map(str, voters_seen))}")
    for voter in filter(None, (next(iter(voters_seen)) or "").split(",")):
        vid, _, address = voter.partition("@")
        host, _, port = address.rpartition(":")
        if vid not in controllers:
            problems.append(f"voter {voter}: node {vid} is not a controller")
            continue
        service, ports = controllers[vid]
        if host != service or not port.isdigit() or int(port) not in ports:
            problems.append(f"voter {voter}: controller {vid} is {service} listening on {sorted(ports)}")
    problems += [f"controller {i} is not a voter" for i in controllers if f"{i}@" not in (next(iter(voters_seen)) or "")]
    return problems


def _check_dynamic(nodes: list[NodeConfig], controllers: dict[str | None, tuple[str, set[int]]]) -> list[str]:
    """A dynamic quorum (KIP-853): the same controller.quorum.bootstrap.servers everywhere, no static voters, and
    each bootstrap server a controller's service on its controller listener."""
    problems: list[str] = []
    seen = {n.properties.get("controller.quorum.bootstrap.servers") for n in nodes}
    if len(seen) != 1 or None in seen:
        problems.append(f"controller.quorum.bootstrap.servers differ or are missing: {sorted(map(str, seen))}")
    problems += [f"{n.service}: controller.quorum.voters beside bootstrap servers" for n in nodes
                 if "controller.quorum.voters" in n.properties]  # fmt: skip
    listening = {(svc, port) for svc, ports in controllers.values() for port in ports}
    for server in sorted({s for value in seen if value for s in value.split(",") if s}):
        host, _, port = server.rpartition(":")
        if not port.isdigit() or (host, int(port)) not in listening:
            problems.append(f"bootstrap server {server} is no controller's listener")
    return problems


def _check_roles(nodes: list[NodeConfig]) -> tuple[list[str], dict[str | None, tuple[str, set[int]]]]:
    """(problems, node.id -> (service, controller listener ports) of each controller) over every KRaft node."""
    problems: list[str] = []
    ids = [n.properties.get("node.id") for n in nodes]
    problems += [f"node.id {i} is used twice" for i, c in Counter(ids).items() if c > 1]
    controllers: dict[str | None, tuple[str, set[int]]] = {}
    for n in nodes:
        p, who = n.properties, n.service
        roles = set(p.get("process.roles", "").split(","))
        if not roles or not roles <= {"broker", "controller"} or roles == {""}:
            problems.append(f"{who}: process.roles {p.get('process.roles')!r} is not broker and/or controller")
        if "zookeeper.connect" in p and not migrating(n):  # Kafka needs it only to migrate from ZooKeeper
            problems.append(f"{who}: KRaft node with zookeeper.connect")
        cnames = set(filter(None, p.get("controller.listener.names", "").upper().split(",")))
        if not cnames:
            problems.append(f"{who}: controller.listener.names is not set")
        pmap = _protocol_map(p)
        problems += [f"{who}: controller listener {c} has no security protocol" for c in cnames if c not in pmap]
        own = {name: port for name, _, port in listeners(p.get("listeners", ""))}
        if "controller" in roles:
            missing = cnames - set(own)
            problems += [f"{who}: controller listener {c} is not in listeners" for c in sorted(missing)]
            controllers[p.get("node.id")] = (who, {own[c] for c in cnames & set(own)})
        elif cnames & set(own):
            problems.append(f"{who}: a broker-only node listens on controller listener {sorted(cnames & set(own))}")
    return problems, controllers


def check_zookeeper(zk: list[NodeConfig], brokers: list[NodeConfig]) -> list[str]:
    """zoo.cfg ensemble and myid of every node, and every broker's zookeeper.connect against it."""
    problems: list[str] = []
    servers = [{k: v for k, v in n.properties.items() if k.startswith("server.")} for n in zk]
    if any(s != servers[0] for s in servers):
        problems.append("zoo.cfg server lists differ between ZooKeeper nodes")
    clients: set[str] = set()
    for node, ensemble in zip(zk, servers, strict=True):
        own = ensemble.get(f"server.{node.myid}", "")
        if not own.startswith(f"{node.service}:"):
            problems.append(f"{node.service}: myid {node.myid} names {own or 'no server line'}")
        standalone = node.properties.get("standaloneEnabled") == "true"
        if len(ensemble) > 1 and standalone:
            problems.append(f"{node.service}: standaloneEnabled=true in a {len(ensemble)}-node ensemble")
    for line in servers[0].values() if servers else []:
        host = line.split(":", 1)[0]
        client_port = line.rpartition(";")[2] if ";" in line else ""
        clients.add(f"{host}:{client_port}")
    for b in brokers:
        connect = b.properties.get("zookeeper.connect", "")
        hosts = set(connect.split("/", 1)[0].split(",")) if connect else set()
        if not hosts or not hosts <= clients:
            problems.append(f"{b.service}: zookeeper.connect {connect!r} is not the ensemble's {sorted(clients)}")
    return problems


def _broker_ids(brokers: list[NodeConfig]) -> list[str]:
    ids = [n.properties.get("broker.id") for n in brokers]
    problems = [f"broker.id {i} is used twice" for i, c in Counter(ids).items() if c > 1]
    return problems + [f"{n.service}: no fixed broker.id" for n, i in zip(brokers, ids, strict=True) if i in (None, "-1")]


def migrating(node: NodeConfig) -> bool:
    return node.properties.get("zookeeper.metadata.migration.enable", "false").lower() == "true"


def _version(text: str) -> tuple[int, int]:
    parts = text.split("-", 1)[0].split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else (0, 0)


def _check_migrating_zk_broker(b: NodeConfig, voters: str | None) -> list[str]:
    """KafkaConfig's rules for a ZooKeeper-mode broker with zookeeper.metadata.migration.enable=true."""
    p, who = b.properties, b.service
    problems = []
    if not p.get("controller.quorum.voters"):
        problems.append(f"{who}: migration enabled without controller.quorum.voters")
    elif voters is not None and p["controller.quorum.voters"] != voters:
        problems.append(f"{who}: controller.quorum.voters {p['controller.quorum.voters']!r} are not the controllers'")
    cnames = set(filter(None, p.get("controller.listener.names", "").upper().split(",")))
    if not cnames:
        problems.append(f"{who}: migration enabled without controller.listener.names")
    pmap = _protocol_map(p)
    problems += [f"{who}: controller listener {c} has no security protocol" for c in sorted(cnames) if c not in pmap]
    if _version(p.get("inter.broker.protocol.version", "")) < (3, 4):
        problems.append(f"{who}: migration needs inter.broker.protocol.version 3.4 or later")
    return problems


def _check_controller_reaches_brokers(c: NodeConfig, broker: NodeConfig) -> list[str]:
    """A migrating controller sends the ZooKeeper-mode brokers their RPCs on its own inter.broker.listener.name."""
    name = c.properties.get("inter.broker.listener.name", "PLAINTEXT").upper()
    wanted = broker.properties.get("inter.broker.listener.name", "PLAINTEXT").upper()
    if name != wanted:
        return [f"{c.service}: inter.broker.listener.name {name} is not the brokers' {wanted}"]
    if _protocol_map(c.properties).get(name) != _protocol_map(broker.properties).get(name):
        return [f"{c.service}: inter-broker listener {name} has another security protocol than the brokers'"]
    return []


def check_migration(zk: list[NodeConfig], kraft: list[NodeConfig], zk_brokers: list[NodeConfig]) -> list[str]:
    """A cluster between ZooKeeper and KRaft mode (Kafka 3.7's "ZooKeeper to KRaft Migration")."""
    problems = check_kraft(kraft) + _broker_ids(zk_brokers)
    problems += check_zookeeper(zk, zk_brokers + [n for n in kraft if migrating(n)])
    roles = {n.service: set(n.properties.get("process.roles", "").split(",")) for n in kraft}
    problems += [
        f"{n.service}: combined broker and controller roles cannot migrate from ZooKeeper"
        for n in kraft
        if {"broker", "controller"} <= roles[n.service] and migrating(n)
    ]
    controllers = [n for n in kraft if "controller" in roles[n.service]]
    controller_ids = {n.properties.get("node.id") for n in controllers}
    broker_ids = [n.properties.get("broker.id") for n in zk_brokers]
    broker_ids += [n.properties.get("node.id") for n in kraft if roles[n.service] == {"broker"}]
    problems += [f"broker id {i} is also a controller's node.id" for i in broker_ids if i in controller_ids]
    voters = next((n.properties.get("controller.quorum.voters") for n in kraft), None)
    for c in controllers:
        if migrating(c) and zk_brokers:  # it reaches them on their inter-broker listener, as it names it
            problems += _check_controller_reaches_brokers(c, zk_brokers[0])
    for b in zk_brokers:
        if migrating(b):
            problems += _check_migrating_zk_broker(b, voters)
            problems += [
                f"{c.service}: finalized (migration off) while {b.service} still runs in ZooKeeper mode"
                for c in controllers
                if not migrating(c)
            ]
    return problems


def check_cluster(nodes: list[NodeConfig]) -> list[str]:
    """Every start-up rule over one rendered cluster's derived configs; [] when all hold."""
    zk = [n for n in nodes if n.role == "zookeeper"]
    kafka = [n for n in nodes if n.role in ("broker", "controller")]
    problems = [msg for n in kafka for msg in check_listeners(n)]
    kraft = [n for n in kafka if "process.roles" in n.properties]
    zk_brokers = [n for n in kafka if "process.roles" not in n.properties]
    if kraft and (zk or zk_brokers):  # a migration from ZooKeeper in progress
        problems += check_migration(zk, kraft, zk_brokers)
    elif kraft:
        problems += check_kraft(kafka)
    else:
        problems += check_zookeeper(zk, kafka)
        problems += _broker_ids(kafka)
    return problems
