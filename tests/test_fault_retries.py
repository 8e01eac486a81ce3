"""Pausing a container the engine cannot freeze: retried for seconds, and "fault not applied" when it never freezes.

The freezer cannot stop a task blocked in the kernel. Here such a task is made on purpose, in a real container: a
process reads into a page registered with userfaultfd that nobody supplies, so it sits in `handle_userfault` and
runc gives up with "unable to freeze" on every attempt, exactly the engine's answer seen when a busy broker was
paused under load. A second thread lets the page go after N seconds (0: never), so the container becomes freezable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from docker.errors import APIError
from docker.models.containers import Container

from clusterctl.chaos import faults
from clusterctl.errors import FaultNotAppliedError
from clusterctl.runtime import docker as dk

pytestmark = pytest.mark.docker

BLOCKER = r"""
import ctypes, fcntl, mmap, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
uffd = libc.syscall(323, os.O_CLOEXEC)  # userfaultfd(2), x86_64
if uffd < 0:
    sys.exit(f"userfaultfd: errno {ctypes.get_errno()}")
fcntl.ioctl(uffd, 0xC018AA3F, bytearray(struct.pack("QQQ", 0xAA, 0, 0)))  # UFFDIO_API
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
page = mmap.PAGESIZE
addr = libc.mmap(None, page, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
fcntl.ioctl(uffd, 0xC020AA00, bytearray(struct.pack("QQQQ", addr, page, 1, 0)))  # UFFDIO_REGISTER, MISSING
hold = float(sys.argv[1])
if hold > 0:
    threading.Thread(target=lambda: (time.sleep(hold), os.close(uffd)), daemon=True).start()
print("holding", flush=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.read(os.open("/dev/zero", os.O_RDONLY), addr, page)  # the kernel's copy faults on the held page
print("released", flush=True)
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def image() -> str:
    from clusterctl.images import build as images

    if dk.client().info().get("CgroupVersion") != "1":
        pytest.skip("the blocked task defeats the cgroup v1 freezer (runc's 'unable to freeze'); this engine runs v2")

    return next(r.image for r in images.build_images(["console"]) if r.target == "console")  # has python3


@pytest.fixture
def containers(image: str, unique_name: str) -> Iterator[list[Container]]:
    made: list[Container] = []
    yield made
    for c in made:
        c.remove(force=True)


def start(made: list[Container], image: str, name: str, hold: float | None) -> Container:
    """A container that sleeps (hold None) or holds a task where the freezer cannot stop it for `hold` s (0: ever)."""
    command = ["sleep", "3600"] if hold is None else ["python3", "-c", BLOCKER, str(hold)]
    c = dk.client().containers.run(
        image, command, name=name, entrypoint=[], user="0", network_mode="none", detach=True,
        # userfaultfd for kernel-mode faults needs CAP_SYS_PTRACE, and Docker's default seccomp profile refuses it
        cap_add=["SYS_PTRACE"], security_opt=["seccomp=unconfined"],
    )  # fmt: skip
    made.append(c)
    if hold is not None:
        dk_wait_logs(c, "holding")
    return c


def dk_wait_logs(c: Container, text: str) -> None:
    from clusterctl.wait import wait_until

    def logs() -> str:
        c.reload()
        if c.status != "running":
            pytest.fail(f"the blocker exited: {c.logs().decode()[-300:]}")
        return c.logs().decode()

    wait_until(logs, timeout=30, what=f"{c.name} to print {text!r}", interval=0.1, done=lambda out: text in out)


def test_busy_container_freezes_after_retries(containers: list[Container], image: str, unique_name: str) -> None:
    # held 4 s: longer than the old four attempts within ~2.3 s (which gave up), well inside FREEZE_TIMEOUT_S
    c = start(containers, image, f"{unique_name}-busy", hold=4.0)
    before = dict(dk.FREEZE_COUNTS)
    t0 = time.monotonic()
    res = faults.pause("broker 1", c.name)
    took = time.monotonic() - t0
    assert (res.before, res.after) == ("running", "paused")
    # refused for the 4 s the task was held (each refusal is runc's own ~0.3 s of attempts), then frozen
    assert res.retries >= 4 and 3.5 < took < dk.FREEZE_TIMEOUT_S, (res.retries, took)
    assert res.note == f"frozen after {res.retries} freeze retries"
    assert dk.FREEZE_COUNTS["retries"] - before["retries"] == res.retries
    assert faults.unpause("broker 1", c.name).after == "running"


def test_never_freezable_is_fault_not_applied(
    containers: list[Container], image: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dk, "FREEZE_TIMEOUT_S", 3.0)  # the real bound is 15 s; the outcome is the same
    c = start(containers, image, f"{unique_name}-stuck", hold=0)
    before = dict(dk.FREEZE_COUNTS)
    with pytest.raises(FaultNotAppliedError, match=r"^pause broker 2 \(.*-stuck\) not applied: .*unable to freeze"):
        faults.pause("broker 2", c.name)
    assert FaultNotAppliedError.exit_code == 75
    assert faults.container_state(c.name) == "running"  # runc thawed every failed attempt
    assert dk.FREEZE_COUNTS["failed"] - before["failed"] == 1


def test_second_follower_not_freezable_undoes_the_first(
    containers: list[Container], image: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pause-followers is all or none: the first follower, paused, is unpaused when the second cannot be."""
    monkeypatch.setattr(dk, "FREEZE_TIMEOUT_S", 2.0)
    first = start(containers, image, f"{unique_name}-f1", hold=None)
    second = start(containers, image, f"{unique_name}-f2", hold=0)
    with pytest.raises(FaultNotAppliedError) as exc:
        faults.pause_all([("broker 2", first.name), ("broker 3", second.name)])
    assert str(exc.value).startswith(f"pause broker 3 ({second.name}) not applied: ")
    assert str(exc.value).endswith("; undone: broker 2 unpaused")
    assert [faults.container_state(c.name) for c in (first, second)] == ["running", "running"]


def test_target_gone_mid_step_is_fault_not_applied(containers: list[Container], image: str, unique_name: str) -> None:
    """The second follower exits between the two pauses: the fault is not applied and the first is unpaused."""
    first = start(containers, image, f"{unique_name}-g1", hold=None)
    second = start(containers, image, f"{unique_name}-g2", hold=None)
    second.kill()
    gone = r"^broker 3 \(.*-g2\) is exited, expected running; undone: broker 2 unpaused$"
    with pytest.raises(FaultNotAppliedError, match=gone):
        faults.pause_all([("broker 2", first.name), ("broker 3", second.name)])
    assert faults.container_state(first.name) == "running"


def test_other_engine_refusals_are_not_retried(containers: list[Container], image: str, unique_name: str) -> None:
    c = start(containers, image, f"{unique_name}-twice", hold=None)
    faults.pause("broker 1", c.name)
    t0 = time.monotonic()
    with pytest.raises(APIError, match="is already paused"):
        dk.pause(dk.get_container(c.name))
    assert time.monotonic() - t0 < 1.0
    faults.unpause("broker 1", c.name)
