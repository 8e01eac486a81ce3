"""Registry images before `up`: which to pull (`--pull never|missing|always`), pulling them with progress, and a
fast probe whether a registry answers at all (`init` and the demo choose their profile by it).

`up` pulls here first and starts its health clock afterwards, so a slow first pull never counts against
`--timeout`; compose itself then runs with `--pull never`. Images `clusterctl images build` makes are never
pulled (no registry carries them), and the offline profile pulls nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import docker
from docker.errors import APIError, DockerException

from clusterctl.errors import ClusterctlError, NotFoundError, UnreachableError, UsageError
from clusterctl.runtime import docker as dk
from clusterctl.spec import profiles

PullPolicy = Literal["never", "missing", "always"]
PULL_POLICIES: tuple[str, ...] = ("never", "missing", "always")
PROBE_TIMEOUT_S = 5.0

# (image, bytes done, bytes total or None) while a pull runs
OnPull = Callable[[str, int, int | None], None]

# what the engine says when the registry answered but has no such image (or refuses it): exit 3, else 4
_NOT_FOUND_MARKS = ("manifest unknown", "not found", "pull access denied", "repository does not exist", "denied")


@dataclass
class PullResult:
    policy: str
    pulled: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # there already (missing) or ours (built here)
    seconds: float = 0.0


def registry_images(images: Iterable[str]) -> list[str]:
    """The images a registry serves, in first-seen order without repeats (ours are built, never pulled)."""
    seen: dict[str, None] = {}
    for image in images:
        if not profiles.ours(image):
            seen.setdefault(image, None)
    return list(seen)


def plan(profile: str, images: Iterable[str], policy: str, present: Callable[[str], bool]) -> list[str]:
    """Which images to pull, in order: none offline or with `never`, the absent ones with `missing`, all with
    `always` (each registry image once, in the compose file's order)."""
    if policy not in PULL_POLICIES:
        raise UsageError(f"--pull must be one of {', '.join(PULL_POLICIES)}, got {policy!r}")
    if profile == "offline" or policy == "never":
        return []
    wanted = registry_images(images)
    return wanted if policy == "always" else [i for i in wanted if not present(i)]


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())[:240]


def pull_error(image: str, exc: BaseException) -> ClusterctlError:
    """One line: NotFoundError (3) when the registry has no such image, else UnreachableError (4)."""
    reason = _reason(exc)
    cls = NotFoundError if any(m in reason.lower() for m in _NOT_FOUND_MARKS) else UnreachableError
    hint = "check the image name (images.* in the spec) and `docker login`" if cls is NotFoundError else (
        "no registry answered: use the offline profile (`clusterctl init --profile offline`) or `docker load` it"
    )  # fmt: skip
    return cls(f"pulling {image} failed: {reason}", hint=hint)


def pull_one(image: str, on_pull: OnPull | None = None) -> None:
    """`docker pull IMAGE` through the engine, reporting bytes across its layers."""
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
    layers: dict[str, tuple[int, int | None]] = {}
    try:
        for event in dk.client().api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise APIError(str(event["error"]))
            detail = event.get("progressDetail") or {}
            if event.get("id") and "current" in detail:
                layers[str(event["id"])] = (int(detail["current"]), detail.get("total"))
            if on_pull is not None and layers:
                totals = [t for _, t in layers.values()]
                total = sum(int(t) for t in totals if t) if all(totals) else None
                on_pull(image, sum(c for c, _ in layers.values()), total)
    except (APIError, DockerException) as exc:
        raise pull_error(image, exc) from None


def pull(images: list[str], on_pull: OnPull | None = None) -> None:
    """Pull each image in order; the first failure stops the rest (nothing is started after a failed pull)."""
    for image in images:
        pull_one(image, on_pull)


def require_present(images: Iterable[str], why: str) -> None:
    """NotFoundError naming every absent image (`--pull never` with an image not pulled yet)."""
    missing = dk.missing_images(list(dict.fromkeys(images)))
    if missing:
        what = f"image{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        raise NotFoundError(f"{what} not present locally ({why})", hint="run `clusterctl up --pull missing`")


@dataclass
class RegistryProbe:
    reachable: bool
    image: str
    reason: str  # what the engine said, one line


def probe_registry(image: str, timeout: float = PROBE_TIMEOUT_S) -> RegistryProbe:
    """Does a registry serve `image`? The engine asks the registry for its manifest only (no layers are
    downloaded); no engine, no DNS, a refused connection or a timeout all answer quickly with False."""
    try:
        c = docker.from_env(timeout=max(1, round(timeout)))
        c.images.get_registry_data(image)
    except (APIError, DockerException, OSError) as exc:
        return RegistryProbe(False, image, _reason(exc))
    return RegistryProbe(True, image, "the registry answered")
