"""Spec → compose/<name>/docker-compose.yml (+ .env with the CMAK secret or console token), written atomically.

The template is filled from clusterctl.compose.context; clusterctl.compose.writer stages, checks and moves
the files into place all or nothing. Render owns its files and, in .env, only its keys: nothing that
clusterctl did not write is ever deleted or rewritten, and a secret once minted is kept.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from clusterctl.spec import yamlfile
from clusterctl import TEMPLATES_DIR
from clusterctl.compose.context import (
    CONSOLE_TOKEN_VAR,
    SECRET_VAR,
    RenderedService,
    build_context,
    summarize,
)
from clusterctl.compose.environment import CLUSTER_ID_VAR
from clusterctl.compose.stack import build_stack_context
from clusterctl.compose.writer import ENV_FILE, STAGING_PREFIX, OutputPathError, RenderError, merge_env, read_env, write_all
from clusterctl.errors import SpecError
from clusterctl.templating import text_environment
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.monitoring import RULES_FILE
from clusterctl.spec.validate import can_look_at

COMPOSE_TEMPLATE = "docker-compose.yml.j2"
COMPOSE_FILE = "docker-compose.yml"
STACK_TEMPLATE = "docker-stack.yml.j2"  # deploy.target swarm

_SECRET_RE = re.compile(rf"^{SECRET_VAR}=([0-9a-f]{{32,}})\s*$", re.MULTILINE)
_TOKEN_RE = re.compile(rf"^{CONSOLE_TOKEN_VAR}=([0-9a-f]{{32,}})\s*$", re.MULTILINE)
_CLUSTER_ID_RE = re.compile(rf"^{CLUSTER_ID_VAR}=([A-Za-z0-9_-]{{22}})\s*$", re.MULTILINE)
_OWNED = {SECRET_VAR: _SECRET_RE, CONSOLE_TOKEN_VAR: _TOKEN_RE, CLUSTER_ID_VAR: _CLUSTER_ID_RE}


@dataclass
class PhaseRender:
    """What a migration phase renders in place of the spec's own nodes (clusterctl.compose.migration)."""

    context: dict[str, Any]
    services: list[RenderedService]
    cluster_id: str


@dataclass
class RenderResult:
    cluster: str
    profile: str
    engine: str
    compose_file: str
    files: list[str]
    network: str
    subnet: str
    gateway: str
    services: list[RenderedService] = field(default_factory=list)
    secret: str = "none"  # created | kept | none
    validated_by_compose: bool = False
    mode: str = "zookeeper"
    cluster_id: str = "none"  # kraft mode: created | kept
    target: str = "compose"  # deploy.target: compose | swarm (a stack file)
    secrets: str = "none"  # security on: the cluster CA and SCRAM passwords in secrets/ created | kept


def _q(value: Any) -> str:
    """A YAML-safe scalar or flow list (JSON is valid YAML). Spec values cannot contain `$` (validated)."""
    return json.dumps(value)


def _environment(templates_dir: Path) -> jinja2.Environment:
    return text_environment(templates_dir, {"q": _q})


def render_compose(spec: ClusterSpec, templates_dir: Path = TEMPLATES_DIR, context: dict[str, Any] | None = None) -> str:
    """The compose file (or, deploy.target swarm, the stack file) text, deterministic for a given spec;
    `context` replaces the spec's own (a migration phase's, clusterctl.compose.migration)."""
    name = spec.topology.compose_file.name
    template = STACK_TEMPLATE if spec.swarm else COMPOSE_TEMPLATE
    try:
        if context is None:
            context = build_stack_context(spec) if spec.swarm else build_context(spec)
        text = _environment(templates_dir).get_template(template).render(**context)
        yamlfile.load_text(text, f"rendered {name}")
    except jinja2.TemplateError as exc:
        raise RenderError(f"template {template}: {' '.join(str(exc).split())}") from None
    except SpecError as exc:  # the spec asks for what the resolved image cannot do: bad input, as at validation
        raise RenderError(exc.message, exit_code=exc.exit_code) from None
    except yaml.YAMLError as exc:
        raise RenderError(f"rendered {name} is not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    return text


def existing_console_token(out_dir: Path) -> str | None:
    """The console token persisted by an earlier render, if any."""
    return _env_value(out_dir, _TOKEN_RE)


def _env_value(out_dir: Path, pattern: re.Pattern[str]) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        m = pattern.search((out_dir / ENV_FILE).read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    return None


def existing_secret(out_dir: Path) -> str | None:
    """The CMAK secret persisted by an earlier render, if any."""
    return _env_value(out_dir, _SECRET_RE)


def existing_cluster_id(out_dir: Path) -> str | None:
    """The KRaft cluster id persisted by an earlier render, if any."""
    return _env_value(out_dir, _CLUSTER_ID_RE)


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, base64url without padding (Kafka's Uuid; never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def compose_config_check(compose_file: Path) -> bool:
    """`docker compose -f FILE config -q` (engine-less validation); False when compose v2 is absent."""
    return _config_check(compose_file, stack=False)


def stack_config_check(stack_file: Path) -> bool:
    """`docker stack config -c FILE` (engine-less validation, with .env's values in the environment as `up`
    passes them); False when the docker CLI has no `stack config`."""
    return _config_check(stack_file, stack=True)


def _config_check(compose_file: Path, stack: bool) -> bool:
    if not shutil.which("docker"):
        return False
    if not str(compose_file.resolve()).isprintable():  # compose cannot open a path with control characters
        return False
    path = str(compose_file.resolve())
    cmd = ["docker", "stack", "config", "-c", path] if stack else ["docker", "compose", "-f", path, "config", "-q"]
    env = stack_environment(compose_file.parent) if stack else None
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",  # it may quote a path that is not UTF-8
            timeout=60,
            cwd=compose_file.parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if proc.returncode != 0:
        out = (proc.stderr or proc.stdout).strip()
        if "is not a docker command" in out or "unknown command" in out:
            return False
        last = out.splitlines()[-1] if out else "(no output)"
        raise RenderError(f"docker {cmd[1]} rejected the rendered file: {last[:300]}")
    return True


def stack_environment(out_dir: Path) -> dict[str, str]:
    """This process's environment plus render's own keys from `out_dir`'s .env: `docker stack deploy` reads
    no .env file, so the KRaft cluster id reaches the stack file through the environment."""
    import os

    env = dict(os.environ)
    for var, pattern in _OWNED.items():
        if (value := _env_value(out_dir, pattern)) is not None:
            env[var] = value
    return env


MANIFEST_FILE = ".clusterctl-render.json"
RENDER_HEADER = "# Rendered by `clusterctl render`"


def rendered_files(out_dir: Path) -> list[str] | None:
    """The files an earlier render wrote into `out_dir`; None when clusterctl did not render it.

    A manifest names them; a directory rendered before manifests existed is recognised by its
    compose file's header.
    """
    try:
        data = json.loads((out_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        return [f for f in data.get("files", []) if isinstance(f, str) and f and "/" not in f and f not in (".", "..")]
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError):
        return []  # our manifest, unreadable: ours, but delete nothing on its word
    try:
        with (out_dir / COMPOSE_FILE).open(encoding="utf-8") as fh:
            if fh.readline().startswith(RENDER_HEADER):
                return [COMPOSE_FILE, ENV_FILE]
    except (OSError, UnicodeDecodeError):
        pass
    return None


def render(
    spec: ClusterSpec,
    out_dir: Path | None = None,
    templates_dir: Path = TEMPLATES_DIR,
    validate: bool = True,
    protect: Path | None = None,
    phase: PhaseRender | None = None,
) -> RenderResult:
    """Render into `out_dir` (default compose/<name>): all files or none (see clusterctl.compose.writer).

    The output is checked (`docker compose config`) in the staging directory first. Nothing is deleted
    that clusterctl did not write: a non-empty directory that an earlier render did not produce is
    refused, other files in a rendered directory and the user's lines in .env are left alone, and
    `protect` (the spec file) is never written over. `phase` renders a migration phase's nodes instead of the
    spec's own, with the cluster id it names.
    """
    out_dir = Path(out_dir) if out_dir is not None else spec.topology.compose_dir
    can_look_at(out_dir, OutputPathError)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputPathError(f"{out_dir} exists and is not a directory")
    text = render_compose(spec, templates_dir, phase.context if phase else None)
    previous = _previous_render(out_dir)
    env_text, secret_state, cluster_id_state = _env_file(spec, out_dir, phase.cluster_id if phase else None)
    main = spec.topology.compose_file.name
    files: dict[str, tuple[str, int]] = {main: (text, 0o644)}
    if env_text is not None:
        files[ENV_FILE] = (env_text, 0o600)
    if spec.monitoring.enabled:
        files[RULES_FILE] = ((templates_dir / "monitoring" / RULES_FILE).read_text(), 0o644)
    manifest = {"cluster": spec.name, "files": sorted(files)}
    files[MANIFEST_FILE] = (json.dumps(manifest, indent=2) + "\n", 0o644)
    if protect is not None:
        for name in files:
            target = out_dir / name
            if target.exists() and target.resolve() == protect.resolve():
                raise OutputPathError(f"rendering into {out_dir} would overwrite the spec file {protect}")
    # written by an earlier render, not produced now; the user's .env is never removed
    stale = sorted(set(previous) - set(files) - {ENV_FILE})
    validated = write_all(
        out_dir, files, stale, lambda staged: (stack_config_check if spec.swarm else compose_config_check)(staged / main) if validate else False
    )
    secrets_state = "none"
    if spec.security.enabled and phase is None:
        from clusterctl.compose.secrets import ensure_secrets  # cryptography, only for a secured cluster

        secrets_state = ensure_secrets(spec, out_dir)
    return RenderResult(
        cluster=spec.name,
        profile=spec.profile,
        engine=spec.kafka.engine,
        compose_file=str(out_dir / main),
        files=[str(out_dir / f) for f in files if f != MANIFEST_FILE],
        network=spec.topology.network_name,
        subnet=spec.network.subnet,
        gateway=spec.network.gateway_ip,
        services=phase.services if phase else summarize(spec),
        secret=secret_state,
        validated_by_compose=validated,
        mode=spec.kafka.mode,
        cluster_id=cluster_id_state,
        target=spec.deploy.target,
        secrets=secrets_state,
    )


def _previous_render(out_dir: Path) -> list[str]:
    """The files an earlier render left in `out_dir` (none when it is new, empty or holds only the user's .env);
    any other content is refused."""
    try:
        entries = [p.name for p in out_dir.iterdir()] if out_dir.is_dir() else []
    except OSError as exc:
        raise OutputPathError(f"cannot read {out_dir}: {exc.strerror or exc}") from None
    if not [e for e in entries if e != ENV_FILE and not e.startswith(STAGING_PREFIX)]:
        return []
    owned = rendered_files(out_dir)
    if owned is None:
        raise OutputPathError(
            f"{out_dir} is not empty and was not written by clusterctl render; refusing to write into it",
            hint="choose a new or empty directory with --output-dir",
        )
    return owned


def _kept_or_new(found: str | None, wanted: bool, make: Any) -> tuple[str | None, str]:
    if found is not None:
        return found, "kept"
    return (make(), "created") if wanted else (None, "none")


def _env_file(spec: ClusterSpec, out_dir: Path, cluster_id: str | None = None) -> tuple[str | None, str, str]:
    """The new .env text (None: no .env is written), and whether its secret and KRaft cluster id were kept,
    created or none. Only render's keys are set; a secret or id once minted is kept even while unused
    (toggling the manager off and on keeps its token)."""
    existing = read_env(out_dir)
    found = {var: (m.group(1) if (m := rx.search(existing or "")) else None) for var, rx in _OWNED.items()}
    console = spec.kafka_manager.enabled and spec.manager_kind == "console"
    secret_var = CONSOLE_TOKEN_VAR if console else SECRET_VAR
    secret, secret_state = _kept_or_new(found[secret_var], spec.kafka_manager.enabled, lambda: secrets.token_hex(32))
    # kept across renders: a node whose storage was formatted with another id refuses to start
    if cluster_id is not None:  # a migration: the id ZooKeeper's cluster already has
        cluster_id_state = "kept" if found[CLUSTER_ID_VAR] == cluster_id else "created"
    else:
        cluster_id, cluster_id_state = _kept_or_new(found[CLUSTER_ID_VAR], spec.kraft_mode, new_cluster_id)
    what = "console access token" if console else "CMAK application secret"
    values: dict[str, tuple[str, str]] = {}
    if secret is not None:
        values[secret_var] = (secret, f"{what}, generated once for cluster {spec.name}")
    if cluster_id is not None:
        values[CLUSTER_ID_VAR] = (cluster_id, f"KRaft cluster id, generated once for cluster {spec.name}")
    if not values:
        return None, secret_state, cluster_id_state  # nothing of ours in it: a user's .env is not touched
    return merge_env(existing, values), secret_state, cluster_id_state
