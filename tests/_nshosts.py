"""Namespace "hosts" for multi-host Docker Swarm tests: extra Docker daemons, each in a network namespace of
its own, joined by a bridge on this machine. Privileged containers are refused here, so Docker-in-Docker
nodes are out; a daemon started with `nsenter --net` (not `ip netns exec`, which remounts /sys and hides the
cgroups) shares everything but the network with this machine.

    with NsHosts(3, images=["clusterctl/zookeeper:3.8.0"]) as hosts:   # h1 the swarm manager, h2, h3 joined
        hosts.label_racks()            # clusterctl.rack=r1, r2, r3
        ...

`images=` are in every host's engine when the daemons answer: streamed (`docker save | docker load`, no archive
on disk) into h1 alone, and h1's image store copied into the others' data roots before their daemons start, the
layer directories as hard links (image layers are read-only lower dirs; a container writes to a layer of its own).
One `docker load` for any number of hosts, and nothing kept between runs: the links go with the data root.

Every name carries a random tag (`cc<tag>`): namespaces `cc<tag>h1`.., the bridge `cc<tag>br`, host-side veth
ends `cc<tag>h1`..; files live in /run/cc<tag>/ (sockets need short paths) and /var/tmp/cc<tag>/ (data).
Every address comes from one /16 kept for these hosts (BLOCK, 10.99.0.0/16; CLUSTERCTL_NSHOSTS_BLOCK overrides):
the bridge's /24, the daemons' bridge pool, the swarm's overlay pool and a stack's overlay subnet; the harness
refuses to start when anything routed here or any Docker network overlaps it.
`close()` stops the daemons and removes every namespace, link, mount and file; `leftovers()` says what of it
still exists (empty after close). `host.command("lose" | "restore")` is a host's loss and return as a command
line (a test spec's rack stop_command / start_command): `python _nshosts.py lose RUN_DIR`.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.testing import ownership
from clusterctl.wait import wait_until

DOCKERD_READY_S = 60.0
# one harness at a time on this machine: each picks its address blocks from what is routed when it starts, so
# two starting side by side (pytest-xdist workers) could pick the same blocks
LOCK_FILE = Path("/run/clusterctl-nshosts.lock")
# the address block no other test or engineer on this machine uses
BLOCK = ipaddress.IPv4Network(os.environ.get("CLUSTERCTL_NSHOSTS_BLOCK", "10.99.0.0/16"))


def _run(*args: str, check: bool = True, input_: bytes | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(list(args), capture_output=True, input=input_, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.decode(errors='replace').strip()[-400:]}")
    return proc.stdout.decode(errors="replace")


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Subnets this machine routes (every Docker bridge included) and the main daemon's networks."""
    nets = []
    for line in _run("ip", "-4", "route", "show", "table", "all").splitlines():
        word = line.split()[0] if line.split() else ""
        if word[:1].isdigit():
            nets.append(ipaddress.IPv4Network(word if "/" in word else f"{word}/32", strict=False))
    out = _run("docker", "network", "inspect", "--format", "{{json .IPAM.Config}}", *_docker_networks(), check=False)
    for line in out.splitlines():
        for cfg in json.loads(line or "null") or []:
            if cfg.get("Subnet", "").count(".") == 3:
                nets.append(ipaddress.IPv4Network(cfg["Subnet"], strict=False))
    return nets


def _docker_networks() -> list[str]:
    return _run("docker", "network", "ls", "-q", check=False).split()


def _carve(block: ipaddress.IPv4Network) -> tuple[ipaddress.IPv4Network, ...]:
    """The bridge's /24, the daemons' pool, the swarm's overlay pool and the stacks' /24, all inside `block`."""
    quarters = list(block.subnets(new_prefix=block.prefixlen + 2))
    return (
        next(quarters[0].subnets(new_prefix=24)),
        quarters[1],
        quarters[2],
        next(quarters[3].subnets(new_prefix=24)),
    )


@dataclass
class NsHost:
    name: str  # the namespace, and the host-side end of its veth pair
    index: int
    ip: str
    run_dir: Path  # socket, pid file, exec root, host.json
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None  # the daemon, when this process started it

    @property
    def endpoint(self) -> str:
        return f"unix://{self.run_dir / 'docker.sock'}"

    def docker(self, *args: str, check: bool = True, timeout: float = 120, input_: bytes | None = None) -> str:
        """The docker CLI against this host's daemon."""
        return _run("docker", "-H", self.endpoint, *args, check=check, timeout=timeout, input_=input_)

    def answers(self) -> bool:
        proc = subprocess.run(["docker", "-H", self.endpoint, "version"], capture_output=True, timeout=20)
        return proc.returncode == 0

    def command(self, verb: str) -> list[str]:
        """`lose` or `restore` this host as a command (a rack's stop / start command in a spec)."""
        return [sys.executable, str(Path(__file__).resolve()), verb, str(self.run_dir)]

    def daemon_pid(self) -> int | None:
        """The pid of this host's dockerd while it runs (its pid file, checked against /proc)."""
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.run_dir / "docker.pid").read_text().strip())
            if str(self.run_dir) in (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace"):
                return pid
        return None

    def spawn_daemon(self) -> subprocess.Popen[bytes]:
        """Start this host's dockerd (host.json holds its command line) in a session of its own."""
        cmd = json.loads((self.run_dir / "host.json").read_text())["dockerd"]
        (self.run_dir / "docker.pid").unlink(missing_ok=True)
        with (self.run_dir / "dockerd.log").open("ab") as log:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def lose(self) -> None:
        """The host is gone at once: its link goes down and its daemon, containerd, shims and every container
        process are SIGKILLed together (nothing shuts down cleanly, nothing answers on its address)."""
        _run("ip", "link", "set", self.name, "down")
        pid = self.daemon_pid()
        pids = _tree(pid) if pid else set()
        for other, args in _processes_by_pid().items():
            # containerd shims name our exec root, containers are their children; `_nshosts.py lose RUN_DIR`
            # (this very process, when run as a command) names it too
            if str(self.run_dir) in args and Path(__file__).name not in args:
                pids |= _tree(other)
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        wait_until(lambda: not self.answers(), timeout=30, what=f"dockerd of {self.name} gone")

    def restore(self) -> None:
        """The lost host comes back: link up, its daemon started on the same data; it rejoins the swarm."""
        _run("ip", "link", "set", self.name, "up")
        for mount in _mounts_under(str(self.run_dir) + "/"):
            _run("umount", "-l", mount, check=False)
        self.proc = self.spawn_daemon()
        wait_until(self.answers, timeout=DOCKERD_READY_S, what=f"dockerd of namespace host {self.name} again")


def _host_from(run_dir: str) -> NsHost:
    h = json.loads((Path(run_dir) / "host.json").read_text())
    return NsHost(h["name"], h["index"], h["ip"], Path(run_dir), Path(h["data_dir"]))


class NsHosts:
    """`n` namespace hosts on one bridge; h1 initialises a swarm, the others join it (`swarm=False`: no swarm)."""

    def __init__(self, n: int, *, swarm: bool = True, images: list[str] | None = None) -> None:
        self.tag = secrets.token_hex(2)
        self.prefix = f"cc{self.tag}"
        self.n, self.swarm = n, swarm
        self.images = list(images or [])
        self.run_root = Path("/run") / self.prefix
        self.data_root = Path("/var/tmp") / self.prefix
        self.bridge = f"{self.prefix}br"
        self.hosts: list[NsHost] = []
        self.racks: dict[str, NsHost] = {}
        self._lock: int | None = None
        self._claim = ""
        self.link_net, self.pool, self.swarm_pool, self.stack_net = _carve(BLOCK)

    def _check_block(self) -> None:
        """Under the lock: nothing here may use BLOCK (a harness's leftovers, a Docker network)."""
        clash = sorted({str(n) for n in _used_networks() if n.overlaps(BLOCK) and n.prefixlen > 0})
        if clash:
            raise RuntimeError(f"namespace hosts' block {BLOCK} is in use here ({', '.join(clash)})")

    @property
    def gateway(self) -> str:
        """The bridge's address on this machine: how the host side reaches every namespace host."""
        return str(self.link_net.network_address + 1)

    def free_subnet(self) -> str:
        """A /24 for a stack's overlay network, outside every pool (clashes with nothing here)."""
        return str(self.stack_net)

    @classmethod
    def of_tag(cls, tag: str, n: int) -> NsHosts:
        """The harness a (dead) run started with this tag and `n` hosts, for `close()`: every name and path."""
        hosts = cls(n, swarm=False)
        hosts.tag, hosts.prefix = tag, f"cc{tag}"
        hosts.run_root, hosts.data_root = Path("/run") / hosts.prefix, Path("/var/tmp") / hosts.prefix
        hosts.bridge = f"{hosts.prefix}br"
        for i in range(1, n + 1):
            ip = str(hosts.link_net.network_address + 1 + i)
            hosts.hosts.append(
                NsHost(f"{hosts.prefix}h{i}", i, ip, hosts.run_root / f"h{i}", hosts.data_root / f"h{i}")
            )
        return hosts

    def __enter__(self) -> NsHosts:
        self._lock = os.open(LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # waits for another harness's close()
        # the test run's sweep closes these hosts when this process dies before `close()` (clusterctl.testing.ownership)
        self._claim = ownership.current().claim_command([sys.executable, __file__, "close", self.tag, str(self.n)])
        try:
            self._check_block()
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
            if not self.leftovers():
                ownership.current().release(self._claim)
        finally:
            if self._lock is not None:
                os.close(self._lock)  # releases the flock
                self._lock = None

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        # br_netfilter sends bridged frames through FORWARD, whose policy the main daemon sets to DROP
        _run("iptables", "-I", "FORWARD", "1", *self._forward_rule)
        for i in range(1, self.n + 1):
            self.hosts.append(self._add_host(i))
        for host in self.hosts:
            self._write_host_file(host)
        starting = self.hosts
        if self.images:  # h1 first, its image store seeds the others' before their daemons start
            first = self.hosts[0]
            first.proc = first.spawn_daemon()
            wait_until(first.answers, timeout=DOCKERD_READY_S, what=f"dockerd of namespace host {first.name}")
            _stream_load(first, self.images)
            self._seed_images(first, self.hosts[1:])
            starting = self.hosts[1:]
        for host in starting:
            host.proc = host.spawn_daemon()
        for host in starting:
            wait_until(host.answers, timeout=DOCKERD_READY_S, what=f"dockerd of namespace host {host.name}")
        if self.swarm:
            self._form_swarm()

    @property
    def _forward_rule(self) -> tuple[str, ...]:
        return ("-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT", "-m", "comment", "--comment", self.prefix)

    def _add_host(self, i: int) -> NsHost:
        name = f"{self.prefix}h{i}"
        ip = str(self.link_net.network_address + 1 + i)
        _run("ip", "netns", "add", name)
        _run("ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
        _run("ip", "link", "set", f"{name}p", "netns", name)
        _run("ip", "link", "set", name, "master", self.bridge, "up")
        ns = ("ip", "-n", name)
        _run(*ns, "link", "set", f"{name}p", "name", "eth0")
        _run(*ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _run(*ns, "link", "set", "eth0", "up")
        _run(*ns, "link", "set", "lo", "up")
        _run(*ns, "route", "add", "default", "via", self.gateway)
        run_dir, data_dir = self.run_root / f"h{i}", self.data_root / f"h{i}"
        run_dir.mkdir(parents=True, mode=0o700)
        data_dir.mkdir(parents=True, mode=0o700)
        return NsHost(name, i, ip, run_dir, data_dir)

    def _write_host_file(self, host: NsHost) -> None:
        """What `lose` / `restore` from another process need: the namespace, the dockerd command line."""
        cmd = [
            # a swarm task pulls its image before it starts, even when the image is here; there is no registry
            # for these hosts (no route out), so each task would wait for a pull to fail: this daemon uses the
            # image it has (what an offline host does; `docker stack deploy --resolve-image never` is the other half)
            "env", "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1",
            "nsenter", f"--net=/var/run/netns/{host.name}",
            "dockerd",
            "--data-root", str(host.data_dir / "docker"),
            "--exec-root", str(host.run_dir / "exec"),
            "-H", host.endpoint,
            "--pidfile", str(host.run_dir / "docker.pid"),
            "--bridge", "none",
            "--iptables=false",
            "--ip-masq=false",
            "--default-address-pool", f"base={self.pool},size=24",
            "--storage-driver", "overlay2",
        ]  # fmt: skip
        about = {"name": host.name, "index": host.index, "ip": host.ip, "data_dir": str(host.data_dir), "dockerd": cmd}
        (host.run_dir / "host.json").write_text(json.dumps(about))

    def _form_swarm(self) -> None:
        manager = self.hosts[0]
        manager.docker(
            "swarm", "init", "--advertise-addr", manager.ip, "--listen-addr", f"{manager.ip}:2377",
            "--default-addr-pool", str(self.swarm_pool), "--default-addr-pool-mask-length", "24",
        )  # fmt: skip
        token = manager.docker("swarm", "join-token", "-q", "worker").strip()
        for host in self.hosts[1:]:
            host.docker("swarm", "join", "--advertise-addr", host.ip, "--listen-addr", f"{host.ip}:2377",
                        "--token", token, f"{manager.ip}:2377")  # fmt: skip
        wait_until(lambda: self.ready_nodes() == self.n, timeout=60, what=f"{self.n} ready swarm nodes", seen=str)

    # ---------------------------------------------------------------- use

    @property
    def manager(self) -> NsHost:
        return self.hosts[0]

    def nodes(self) -> list[dict[str, Any]]:
        """`docker node inspect` of every swarm node, as the manager sees them."""
        ids = self.manager.docker("node", "ls", "-q").split()
        return list(json.loads(self.manager.docker("node", "inspect", *ids)))

    def ready_nodes(self) -> int:
        return sum(1 for n in self.nodes() if n["Status"]["State"] == "ready")

    def node_id(self, host: NsHost) -> str:
        for n in self.nodes():
            if n["Status"].get("Addr") == host.ip:
                return str(n["ID"])
        raise RuntimeError(f"no swarm node with address {host.ip}")

    def label_racks(self, dedicated_manager: bool = False) -> dict[str, str]:
        """Label the hosts' nodes clusterctl.rack=r1, r2, ..; rack -> address (`self.racks`: rack -> host).

        `dedicated_manager`: the manager (h1) carries no rack and is drained (it runs no task, as a production
        swarm's managers often do), so a drill may stop any rack's host and still talk to the swarm."""
        hosts = self.hosts[1:] if dedicated_manager else self.hosts
        if dedicated_manager:
            self.manager.docker("node", "update", "--availability", "drain", self.node_id(self.manager))
        self.racks = {f"r{k}": host for k, host in enumerate(hosts, 1)}
        for rack, host in self.racks.items():
            self.manager.docker("node", "update", "--label-add", f"clusterctl.rack={rack}", self.node_id(host))
        return {rack: host.ip for rack, host in self.racks.items()}

    def _seed_images(self, source: NsHost, targets: list[NsHost]) -> None:
        """Copy the image store of `source` (images loaded, no container yet) into each target's data root before
        its daemon starts: the image metadata copied, the overlay2 layer directories hard-linked (read-only lower
        dirs, never written; a container's own layer is new on its host). The layer store's short-name links (l/)
        are relative, so they hold in the copy. The running source daemon bind-mounts its overlay2 directory onto
        itself (a hard link across that mount fails with EXDEV), so both sides are reached through a plain bind
        mount of the data root (submounts left out) under the run dir; it is unmounted at once (close() would)."""
        view = self.run_root / "seed"
        view.mkdir(mode=0o700)
        _run("mount", "--bind", str(self.data_root), str(view))
        try:
            src = view / source.data_dir.name / "docker"
            for target in targets:
                dst = view / target.data_dir.name / "docker"
                dst.mkdir(mode=0o710)
                _run("cp", "-a", str(src / "image"), str(dst / "image"))
                _run("cp", "-al", str(src / "overlay2"), str(dst / "overlay2"))
        finally:
            _run("umount", str(view), check=False)
            with contextlib.suppress(OSError):
                view.rmdir()

    def load_images(self, images: list[str], hosts: list[NsHost] | None = None) -> None:
        """`docker save | docker load` into running hosts (every host unless `hosts`), streamed: no archive.
        (`NsHosts(n, images=...)` costs one load for all hosts; this one load per host.)"""
        for host in self.hosts if hosts is None else hosts:
            _stream_load(host, images)

    def stop_daemon(self, host: NsHost, timeout: float = 60) -> None:
        """Stop a host's dockerd (and with it every container on it), whoever started it."""
        pid = host.daemon_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # a second SIGTERM (close() signals every daemon first) changes nothing
        try:
            wait_until(lambda: host.daemon_pid() is None, timeout=timeout, what=f"dockerd of {host.name} stopped")
        except Exception:
            _kill_group(pid)
        finally:
            if host.proc is not None:
                host.proc.poll()

    def lose(self, host: NsHost) -> None:
        host.lose()

    def restore(self, host: NsHost) -> None:
        host.restore()

    # ---------------------------------------------------------------- teardown

    def close(self) -> None:
        """Leave no daemon, namespace, link, mount or file behind (also after a failed start)."""
        pids = [host.daemon_pid() for host in self.hosts]
        for pid in pids:  # every daemon shuts down at once (each takes seconds), then each is waited for
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        for host in self.hosts:
            self.stop_daemon(host)
        for pid in pids:
            if pid is not None:
                _kill_group(pid)  # containerd and shims started by that dockerd (its own session)
        # a shim outlives a daemon killed mid-shutdown (an interrupted run): each shim leads a group of its own
        ours = (f"{self.run_root}/", f"{self.data_root}/")
        strays = [pid for pid, cmd in _processes_by_pid().items() if any(root in cmd for root in ours)]
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in strays), timeout=10,
                       what="stray processes of the namespace hosts gone")  # fmt: skip
        for mount in self._mounts():
            _run("umount", "-l", mount, check=False)
        for host in self.hosts:
            _run("ip", "netns", "del", host.name, check=False)
            _run("ip", "link", "del", host.name, check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        for _ in range(3):  # inserted once; deleted until none is left
            if subprocess.run(["iptables", "-D", "FORWARD", *self._forward_rule], capture_output=True).returncode:
                break
        shutil.rmtree(self.run_root, ignore_errors=True)
        shutil.rmtree(self.data_root, ignore_errors=True)

    def _mounts(self) -> list[str]:
        """Mount points under our directories, deepest first."""
        return _mounts_under(str(self.run_root) + "/", str(self.data_root) + "/")

    def leftovers(self) -> dict[str, list[str]]:
        """What of these hosts still exists: namespaces, links, processes, mounts, files."""
        links = _run("ip", "-o", "link", "show").splitlines()
        found = {
            "namespaces": [n for n in _run("ip", "netns", "list").split() if n.startswith(self.prefix)],
            "links": [ln.split(":")[1].strip() for ln in links if f" {self.prefix}" in ln],
            "processes": [a for a in _processes() if str(self.run_root) in a or str(self.data_root) in a],
            "mounts": self._mounts(),
            "files": [str(p) for p in (self.run_root, self.data_root) if p.exists()],
            "iptables": [ln for ln in _run("iptables", "-S", "FORWARD").splitlines() if self.prefix in ln],
        }
        return {k: v for k, v in found.items() if v}


def _stream_load(host: NsHost, images: list[str], timeout: float = 600) -> None:
    """`docker save IMAGES | docker -H HOST load`: the main engine's images into a host, no archive on disk."""
    save = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert save.stdout is not None
        load = subprocess.run(
            ["docker", "-H", host.endpoint, "load", "-q"], stdin=save.stdout, capture_output=True, timeout=timeout
        )
        save.stdout.close()
        save_err = save.stderr.read() if save.stderr else b""
        if save.wait(timeout=60) != 0 or load.returncode != 0:
            err = (save_err + load.stderr).decode(errors="replace").strip()[-400:]
            raise RuntimeError(f"docker save {' '.join(images)} | docker -H {host.endpoint} load: {err}")
    finally:
        if save.poll() is None:
            save.kill()
            save.wait()


def _mounts_under(*roots: str) -> list[str]:
    """Mount points under `roots`, deepest first."""
    with open("/proc/self/mounts", encoding="utf-8") as fh:
        points = [line.split()[1] for line in fh]
    return sorted({p for p in points if p.startswith(roots)}, key=len, reverse=True)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _processes() -> list[str]:
    return list(_processes_by_pid().values())


def _processes_by_pid() -> dict[int, str]:
    out = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                out[int(p.name)] = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return out


def _tree(root: int) -> set[int]:
    """`root` and every descendant process."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo += children.get(pid, [])
    return out


if __name__ == "__main__":  # `_nshosts.py lose|restore RUN_DIR`: a rack's stop / start command in a test spec
    verb, run_dir = sys.argv[1:3]
    if verb == "close":  # `_nshosts.py close TAG N`: the sweep of a test run that died with these hosts up
        NsHosts.of_tag(run_dir, int(sys.argv[3])).close()
    else:
        getattr(_host_from(run_dir), verb)()
