"""Offline images, built locally with no pull: a debootstrapped Debian base and images FROM it.

Each image carries a label with the hash of its build inputs; a build whose image already exists
with the same hash is skipped (``force`` rebuilds). The build inputs live in templates/images/. The Kafka
image carries an installation assembled from Kafka's own Maven Central artifacts (images/kafka_maven.py),
or a binary distribution when one is given.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from docker.errors import APIError, BuildError, DockerException

from clusterctl import TEMPLATES_DIR
from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.images import kafka_maven
from clusterctl.images.inputs import console_context, console_hash_inputs, hash_file, spark_context, spark_hash_inputs
from clusterctl.runtime import docker as dk
from clusterctl.spec import kafkadist
from clusterctl.spec.profiles import BASE_IMAGE, TARGETS
from clusterctl.spec.profiles import OFFLINE_KAFKA_IMAGE as KAFKA_IMAGE

HASH_LABEL = "io.clusterctl.inputs-hash"

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
IMAGES_DIR = TEMPLATES_DIR / "images"
CACHE_DIR = kafka_maven.CACHE_DIR

# spark only on request: it is big and few clusters use it
DEFAULT_TARGETS = ("zookeeper", "kafka", "tansu", "console")
CHILD_TARGETS = ("zookeeper", "kafka", "tansu", "spark", "console")

Progress = Callable[[str], None]


def _noop(_: str) -> None:
    pass


@dataclass
class ImageInfo:
    target: str
    image: str
    present: bool
    inputs_hash: str | None = None
    id: str | None = None
    size_mb: float | None = None
    created: str | None = None


@dataclass
class BuildResult:
    target: str
    image: str
    action: str  # built | skipped
    seconds: float
    inputs_hash: str


def list_images() -> list[ImageInfo]:
    """The offline images and whether each exists locally."""
    out: list[ImageInfo] = []
    names = [(t, n) for t, n in TARGETS.items() if t != "kafka"]
    versions = kafkadist.built_versions() or [kafkadist.UNBUILT_TAG]
    kafka = [kafkadist.offline_image(v) for v in versions]
    names[2:2] = [("kafka", n) for n in kafka]
    for target, name in names:
        try:
            img = dk.client().images.get(name)
        except DockerException:
            out.append(ImageInfo(target, name, False))
            continue
        out.append(
            ImageInfo(
                target=target,
                image=name,
                present=True,
                inputs_hash=(img.labels or {}).get(HASH_LABEL),
                id=img.short_id.removeprefix("sha256:"),
                size_mb=round(int(img.attrs.get("Size", 0)) / 1e6, 1),
                created=str(img.attrs.get("Created", ""))[:19],
            )
        )
    return out


# ---- inputs and hashes ----


def _hash_files(h: hashlib._Hash, root: Path, skip_top: tuple[str, ...] = ()) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.relative_to(root).parts[0] in skip_top:
            continue
        h.update(str(path.relative_to(root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")


def base_packages() -> list[str]:
    lines = (IMAGES_DIR / "base" / "packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def base_hash() -> str:
    h = hashlib.sha256()
    h.update(f"{DEBIAN_SUITE} {DEBIAN_MIRROR} minbase\n".encode())
    _hash_files(h, IMAGES_DIR / "base")
    return h.hexdigest()[:16]


def _child_hash(target: str, extra: Path | None) -> str:
    h = hashlib.sha256()
    h.update(base_hash().encode())
    _hash_files(h, IMAGES_DIR / target)
    if target == "spark":
        spark_hash_inputs(h)
    if target == "console":
        console_hash_inputs(h)
    if extra is not None:
        if extra.is_dir():
            _hash_files(h, extra, skip_top=("logs",))  # what a Kafka run on the host writes there
        else:
            hash_file(h, extra)
    return h.hexdigest()[:16]


def kafka_dist_root(dist: Path) -> str:
    """Validate a Kafka distribution (tarball or unpacked dir); return its top-level dir name ('' for a dir)."""
    if not dist.exists():
        raise NotFoundError(f"--kafka-dist {dist} does not exist")
    if dist.is_dir():
        if not (dist / "bin" / "kafka-server-start.sh").is_file():
            raise UsageError(f"--kafka-dist {dist} is not a Kafka distribution (no bin/kafka-server-start.sh)")
        kafkadist.dist_version(dist)
        return ""
    try:
        with tarfile.open(dist, "r:*") as tar:
            for member in tar:
                parts = member.name.lstrip("./").split("/")
                if parts[-2:] == ["bin", "kafka-server-start.sh"] and len(parts) <= 3:
                    kafkadist.dist_version(dist)
                    return parts[0] if len(parts) == 3 else ""
    except (tarfile.TarError, OSError, EOFError):
        raise UsageError(f"--kafka-dist {dist} is not a readable tar archive (expected kafka_2.13-3.x.y.tgz)") from None
    raise UsageError(
        f"--kafka-dist {dist} is not a Kafka distribution (no bin/kafka-server-start.sh)",
        hint="use the binary release, e.g. kafka_2.13-3.7.0.tgz, not the source release",
    )


def _tansu_binary() -> Path:
    from clusterctl.images.tansu import tansu_binary

    return Path(tansu_binary())


# ---- builds ----


def _existing_hash(image: str) -> str | None:
    labels = dk.image_labels(image)
    return None if labels is None else labels.get(HASH_LABEL, "")


_DEBOOTSTRAP_STEPS = ("I: Retrieving", "I: Extracting", "I: Unpacking", "I: Configuring", "I: Installing")


def _build_base(inputs_hash: str, progress: Progress) -> None:
    if shutil.which("debootstrap") is None:
        raise ClusterctlError("debootstrap not found", hint="apt-get install debootstrap (scripts/setup.sh does)")
    if os.geteuid() != 0:
        raise ClusterctlError("building the base image runs debootstrap, which needs root")
    cache = CACHE_DIR / "debootstrap-cache"
    cache.mkdir(parents=True, exist_ok=True)
    logs = CACHE_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / "debootstrap.log"
    work = Path(tempfile.mkdtemp(prefix="clusterctl-rootfs-"))
    rootfs = work / "rootfs"
    try:
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(base_packages())}",
            f"--cache-dir={cache}",
            DEBIAN_SUITE,
            str(rootfs),
            DEBIAN_MIRROR,
        ]
        with log_path.open("w") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if line.startswith(_DEBOOTSTRAP_STEPS):
                    progress(f"base: {line[3:].strip()[:70]}")
            rc = proc.wait()
        if rc != 0:
            tail = log_path.read_text().strip().splitlines()[-1:] or ["?"]
            raise ClusterctlError(f"debootstrap failed ({rc}): {tail[0][:160]}", hint=f"full log: {log_path}")
        progress("base: cleaning rootfs")
        subprocess.run([str(IMAGES_DIR / "base" / "clean-rootfs.sh"), str(rootfs)], check=True)
        progress("base: docker import")
        changes = [
            f"LABEL {HASH_LABEL}={inputs_hash}",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            'CMD ["bash"]',
        ]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp_cmd = ["docker", "import"]
        for ch in changes:
            imp_cmd += ["--change", ch]
        imp = subprocess.run([*imp_cmd, "-", BASE_IMAGE], stdin=tar.stdout, capture_output=True, text=True)
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise ClusterctlError(f"docker import of the base rootfs failed: {imp.stderr.strip()[:200]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _docker_build(target: str, image: str, context: Path, inputs_hash: str, progress: Progress) -> None:
    """Classic (non-BuildKit) build with no pull; streams step lines to `progress`."""
    api = dk.client().api
    previous = _image_id(image)
    last: list[str] = []
    try:
        for chunk in api.build(
            path=str(context),
            tag=image,
            labels={HASH_LABEL: inputs_hash},
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
        ):
            if "error" in chunk:
                raise ClusterctlError(f"building {image} failed: {str(chunk['error']).strip()[:200]}")
            line = str(chunk.get("stream", "")).strip()
            if line:
                last = [*last[-5:], line]
                if line.startswith("Step "):
                    progress(f"{target}: {line[:80]}")
    except (APIError, BuildError) as exc:
        raise ClusterctlError(f"building {image} failed: {str(exc)[:200]}") from None
    current = _image_id(image)
    if current is None:
        raise ClusterctlError(f"building {image} produced no image: {' | '.join(last)[:200]}")
    if previous is not None and previous != current:
        # the replaced build would linger as a dangling <none> image
        with contextlib.suppress(DockerException):
            dk.client().images.remove(previous, noprune=False)


def _image_id(image: str) -> str | None:
    try:
        return str(dk.client().images.get(image).id)
    except DockerException:
        return None


def _context(target: str, work: Path, kafka_dist: Path | None) -> Path:
    ctx = work / target
    shutil.copytree(IMAGES_DIR / target, ctx)
    if target == "tansu":
        shutil.copy2(_tansu_binary(), ctx / "tansu")
    elif target == "spark":
        spark_context(ctx)
    elif target == "console":
        console_context(ctx)
    elif target == "kafka":
        assert kafka_dist is not None
        dest = ctx / "kafka"
        if kafka_dist.is_dir():
            shutil.copytree(kafka_dist, dest, symlinks=True, ignore=_top_level_logs(kafka_dist))
        else:
            top = kafka_dist_root(kafka_dist)
            unpack = work / "kafka-unpack"
            unpack.mkdir()
            with tarfile.open(kafka_dist, "r:*") as tar:
                tar.extractall(unpack, filter="tar")
            shutil.move(str(unpack / top) if top else str(unpack), dest)
        (dest / "logs").mkdir(exist_ok=True)
    return ctx


def _top_level_logs(root: Path) -> Callable[[str, list[str]], list[str]]:
    def ignore(directory: str, names: list[str]) -> list[str]:
        return ["logs"] if Path(directory) == root and "logs" in names else []

    return ignore


def resolve_targets(targets: Iterable[str], kafka_dist: Path | None) -> list[str]:
    """Validate targets (default: zookeeper, kafka, tansu, console)."""
    chosen = list(dict.fromkeys(targets)) or list(DEFAULT_TARGETS)
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise UsageError(f"unknown image target {unknown[0]!r}; choose from {', '.join(TARGETS)}")
    if "kafka" in chosen and kafka_dist is not None:
        kafka_dist_root(kafka_dist)
    return chosen


def kafka_installation(kafka_dist: Path | None, kafka_version: str | None, progress: Progress = _noop) -> Path:
    """What the Kafka image carries: the given distribution (validated by the caller), else Kafka `kafka_version`
    from Maven Central."""
    if kafka_dist is not None:
        if kafka_version is not None:
            raise UsageError("give --kafka-dist or --kafka-version, not both")
        return kafka_dist
    return kafka_maven.assemble(kafka_version or kafka_maven.DEFAULT_KAFKA_VERSION, progress).path


def build_images(
    targets: Iterable[str] = (),
    kafka_dist: Path | None = None,
    force: bool = False,
    progress: Progress = _noop,
    kafka_version: str | None = None,
) -> list[BuildResult]:
    """Build the requested offline images (the base first), skipping those whose inputs are unchanged.

    The Kafka image carries `kafka_dist` when given, else Kafka `kafka_version` (default: the newest 3.9.x)
    assembled from Maven Central.
    """
    chosen = resolve_targets(targets, kafka_dist)
    if kafka_version is not None:  # refused before any work
        kafka_maven.maven_version(kafka_version)
        if kafka_dist is not None:
            raise UsageError("give --kafka-dist or --kafka-version, not both")
    dk.client()  # fail fast when no engine answers
    results: list[BuildResult] = []
    with kafka_maven.machine_lock(CACHE_DIR / "images-build.lock"):  # workers and shells share the images
        started = time.monotonic()
        h = base_hash()
        if (force and "base" in chosen) or _existing_hash(BASE_IMAGE) != h:
            progress("base: debootstrap")
            _build_base(h, progress)
            results.append(BuildResult("base", BASE_IMAGE, "built", round(time.monotonic() - started, 1), h))
        else:
            results.append(BuildResult("base", BASE_IMAGE, "skipped", 0.0, h))
        if "kafka" in chosen:
            kafka_dist = kafka_installation(kafka_dist, kafka_version, progress)
        for target in (t for t in CHILD_TARGETS if t in chosen):
            results.append(build_target(target, kafka_dist=kafka_dist, force=force, progress=progress))
    return results


def build_target(
    target: str,
    image: str | None = None,
    kafka_dist: Path | None = None,
    force: bool = False,
    progress: Progress = _noop,
) -> BuildResult:
    """Build one image FROM the (existing) base; `image` overrides the tag (tests build throwaway tags)."""
    if target not in CHILD_TARGETS:
        raise UsageError(f"build_target builds {', '.join(CHILD_TARGETS)}, not {target!r}")
    if _existing_hash(BASE_IMAGE) is None:
        raise NotFoundError(f"{BASE_IMAGE} not built", hint="run `clusterctl images build base`")
    image = image or TARGETS[target]
    if target == "kafka":
        if kafka_dist is None:
            kafka_dist = kafka_installation(None, None, progress)
        kafka_dist_root(kafka_dist)
        if image == KAFKA_IMAGE:
            image = kafkadist.offline_image(kafkadist.dist_version(kafka_dist))
    extra = kafka_dist if target == "kafka" else _tansu_binary() if target == "tansu" else None
    h = _child_hash(target, extra)
    if not force and _existing_hash(image) == h:
        return BuildResult(target, image, "skipped", 0.0, h)
    started = time.monotonic()
    progress(f"{target}: preparing build context")
    with tempfile.TemporaryDirectory(prefix=f"clusterctl-{target}-") as tmp:
        ctx = _context(target, Path(tmp), kafka_dist)
        _docker_build(target, image, ctx, h, progress)
    return BuildResult(target, image, "built", round(time.monotonic() - started, 1), h)
