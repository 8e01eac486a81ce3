"""Run the tutorials' commands and write what they print into the pages: transcripts that cannot drift.

    python docs/transcripts.py                       # every page: tansu pages, then one real cluster for the rest
    python docs/transcripts.py --env tansu           # only the cheap pages (a tansu broker on loopback, seconds)
    python docs/transcripts.py --check --env tansu   # change nothing; exit 1 when a recorded output differs
    python docs/transcripts.py --all                 # rewrite every block (by default a block is rewritten only
                                                     # when its output changed beyond timings, ports and ids)
    python docs/transcripts.py --screenshots         # also the console and drill report pictures (Chromium)

A page opts in with a header comment, and marks each block of commands whose output the script owns:

    <!-- transcripts env=tansu topics=test,orders groups=billing -->
    ...
    <!-- transcript -->
    ```console
    $ clusterctl topic create test -p 1 -r 1
    (everything below a `$ ` line is written by this script: stdout and stderr, then `exit N` when not 0)
    ```
    <!-- /transcript -->

- env=tansu: the commands run against a tansu broker (the Kafka protocol on loopback, no replication: clusterctl's
  quick mode) through $CLUSTERCTL_BOOTSTRAP_SERVER, so the pages show no `-b`. Before a page runs, the topics
  and groups its header names are deleted (they are the page's own: a rerun starts from the same state).
  tests/test_transcripts.py re-runs these pages in CI on the session's tansu broker and compares.
- env=kafka: the commands run in one working directory against the real cluster the pages themselves create
  (`clusterctl init` ... `up`), pages in their header's `order=`; a block marked `<!-- transcript last -->` runs
  after every other page (`down --volumes`). When a default host port (2181.., 9092.., 9000) or the default
  subnet is taken on this machine, the spec `init` wrote is moved to free ones before `render` (as the tests do),
  and the page's recorded addresses then differ from a reader's. Needs Docker and the offline images, and minutes:
  run it under the machine's heavy-work lock (`flock /tmp/clusterctl-heavy.lock python docs/transcripts.py`).

What normalize() removes before two outputs are compared (never from the pages): timings and other decimals,
dates, host ports, ids (hex, UUIDs, Kafka cluster ids), tokens, and the padding of table columns.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
if str(ROOT) not in sys.path:  # `python docs/transcripts.py` from a checkout without an installed clusterctl
    sys.path.insert(0, str(ROOT))

COLUMNS = "100"
BLOCK_RE = re.compile(
    r"(?P<open><!-- transcript(?P<attrs>(?: [\w=,.-]+)*) -->\n```console\n)"
    r"(?P<body>.*?)"
    r"(?P<close>```\n<!-- /transcript -->)",
    re.DOTALL,
)
HEADER_RE = re.compile(r"<!-- transcripts((?: [\w=,.-]+)*) -->")


# ---------------------------------------------------------------------------------------------------- pages


@dataclass
class Block:
    """One marked block: its commands, and the output recorded under each."""

    page: Path
    index: int  # the block's number on its page, from 1
    attrs: dict[str, str]
    commands: list[str]
    recorded: list[str]  # the output under each command, as the page holds it

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}#{self.index}"

    @property
    def last(self) -> bool:
        return "last" in self.attrs


@dataclass
class Page:
    path: Path
    attrs: dict[str, str]
    blocks: list[Block] = field(default_factory=list)

    @property
    def env(self) -> str:
        return self.attrs.get("env", "")

    def names(self, key: str) -> list[str]:
        return [n for n in self.attrs.get(key, "").split(",") if n]


def _attrs(s: str) -> dict[str, str]:
    out = {}
    for word in s.split():
        key, _, value = word.partition("=")
        out[key] = value
    return out


def parse_body(body: str) -> tuple[list[str], list[str]]:
    """A block's text as (commands, the output under each). A command is a `$ ` line (and the lines after one
    that ends in a backslash)."""
    commands: list[str] = []
    outputs: list[list[str]] = []
    continued = False
    for line in body.splitlines():
        if continued:
            commands[-1] += "\n" + line
            continued = line.endswith("\\")
        elif line.startswith("$ "):
            commands.append(line[2:])
            outputs.append([])
            continued = line.endswith("\\")
        elif outputs:
            outputs[-1].append(line)
        elif line.strip():
            raise ValueError(f"text before the first `$ ` command of a transcript block: {line!r}")
    return commands, ["\n".join(o).strip("\n") for o in outputs]


def render_body(commands: Sequence[str], outputs: Sequence[str]) -> str:
    parts = []
    for command, output in zip(commands, outputs, strict=True):
        parts.append(f"$ {command}\n" + (output + "\n" if output else ""))
    return "\n".join(parts)


def load_page(path: Path) -> Page | None:
    text = path.read_text(encoding="utf-8")
    header = HEADER_RE.search(text)
    if header is None:
        return None
    page = Page(path, _attrs(header.group(1)))
    for i, m in enumerate(BLOCK_RE.finditer(text), 1):
        commands, recorded = parse_body(m.group("body"))
        if not commands:
            raise ValueError(f"{path}: transcript block {i} has no `$ ` command")
        page.blocks.append(Block(path, i, _attrs(m.group("attrs")), commands, recorded))
    if not page.blocks:
        raise ValueError(f"{path}: a transcripts header and no transcript block")
    return page


def pages(env: str | None = None) -> list[Page]:
    """Every page with a transcripts header (env=kafka pages in their order=), optionally of one env."""
    found = [p for p in (load_page(path) for path in sorted(DOCS.rglob("*.md"))) if p is not None]
    found = [p for p in found if env is None or p.env == env]
    return sorted(found, key=lambda p: (p.env, int(p.attrs.get("order", "0")), str(p.path)))


def write_page(page: Page, outputs: dict[int, list[str]]) -> bool:
    """Put the new outputs of the page's blocks (by block index) into the page; True when its text changed."""
    text = page.path.read_text(encoding="utf-8")
    counter = iter(range(1, 10_000))

    def replace(m: re.Match[str]) -> str:
        i = next(counter)
        if i not in outputs:
            return m.group(0)
        commands, _ = parse_body(m.group("body"))
        return m.group("open") + render_body(commands, outputs[i]) + m.group("close")

    new = BLOCK_RE.sub(replace, text)
    if new != text:
        page.path.write_text(new, encoding="utf-8")
    return new != text


# ---------------------------------------------------------------------------------------------------- normalize

_NORMALIZE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"token=[\w-]+"), "token=<token>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<date>"),
    (re.compile(r"\b\d{8}T\d{4,6}Z?\b"), "<date>"),  # compact stamps (run directories)
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b"), "<id>"),
    (re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9_-]{22}(?![\w-])"), "<id>"),  # Kafka ids
    (re.compile(r"(?<=[\w\].]):\d{2,5}\b"), ":<port>"),
    (re.compile(r"\d+(?:\.\d+)+"), "<n.n>"),  # timings, rates, sizes, versions
    (re.compile(r"\b\d+(?= ?(?:ms|s|min)\b)"), "<n.n>"),  # integral durations
]
_BOX_RUN = re.compile(r"([━─═┄╌-])\1+")


def normalize(output: str) -> str:
    """What must not change between two runs of a command: its words and integers, line by line."""
    out = []
    for line in output.splitlines():
        for pattern, repl in _NORMALIZE:
            line = pattern.sub(repl, line)
        line = _BOX_RUN.sub(r"\1", line)
        line = re.sub(r"[ \t]+", " ", line).strip()
        if line:
            out.append(line)
    return "\n".join(out)


def differences(block: Block, outputs: Sequence[str]) -> list[str]:
    """A unified diff per command whose output, normalized, is not what the page recorded."""
    found = []
    for command, recorded, now in zip(block.commands, block.recorded, outputs, strict=True):
        a, b = normalize(recorded), normalize(now)
        if a != b:
            diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "recorded", "now", lineterm="", n=1)
            found.append(f"{block.name}: $ {command}\n" + "\n".join(diff))
    return found


# ---------------------------------------------------------------------------------------------------- the CLI

_OPERATOR = re.compile(r"^[<>&|;()\d]*[<>&|;()][<>&|;()\d]*$")  # |, ;, &&, >, 2>, >&, ...


def clusterctl_invocations(command: str) -> list[list[str]]:
    """The argument lists of every `clusterctl ...` in a shell command line (pipes, lists and redirects split)."""
    command = re.sub(r"(?<=\s)\d+(?=[<>])", "", command.replace("\\\n", " "))  # 2>/dev/null: the fd goes
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    found: list[list[str]] = []
    current: list[str] | None = None
    at_start = True
    for token in lex:
        if _OPERATOR.match(token):
            current = None
            at_start = token not in {">", ">>", "<", "2>", ">&", "&>"}
            continue
        if at_start and token == "clusterctl":
            current = []
            found.append(current)
        elif current is not None:
            current.append(token)
        at_start = False
    return found


@functools.cache
def _root_command() -> Any:
    import typer.main

    from clusterctl.cli import build_app

    return typer.main.get_command(build_app())


def cli_error(args: Sequence[str]) -> str | None:
    """Why `clusterctl ARGS` would not parse (an unknown command or option, a bad value), or None."""
    import typer
    import typer._click as click

    command = _root_command()
    try:
        ctx = command.make_context("clusterctl", list(args))
        while hasattr(command, "resolve_command"):  # a group: its command and what follows it
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:  # a group that runs by itself (clusterctl quorum) parses; any other wants a command
                return None if getattr(command, "invoke_without_command", False) else "no command"
            name, sub, rest = command.resolve_command(ctx, rest)
            if sub is None:
                return f"no command {name}"
            ctx = sub.make_context(name or "", rest, parent=ctx)
            command = sub
    except click.ClickException as exc:
        return exc.format_message()
    except typer.Exit:  # --help, --version: parsed, answered, done
        pass
    return None


# ---------------------------------------------------------------------------------------------------- run


@dataclass
class Runner:
    """Runs commands the way a reader types them: bash in `cwd`, the venv's clusterctl first on PATH."""

    cwd: Path
    env: dict[str, str]
    timeout: float = 900

    @classmethod
    def make(cls, cwd: Path, **extra: str) -> Runner:
        venv_bin = str(Path(sys.executable).parent)
        env = {
            **os.environ,
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "COLUMNS": COLUMNS,
            "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave in the order they were written
            "NO_COLOR": "1",
            "TERM": "dumb",
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **extra,
        }
        env.pop("CLUSTERCTL_SPEC", None)
        return cls(cwd, env)

    def run(self, command: str) -> str:
        done = subprocess.run(
            ["bash", "-c", command],  # as a reader's shell runs it: a pipeline's status is its last command's
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=self.timeout,
        )
        out = "\n".join(line.rstrip() for line in done.stdout.strip("\n").splitlines())
        return out + (f"\nexit {done.returncode}" if done.returncode else "")

    def quiet(self, command: str) -> None:
        subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True, timeout=120)


def run_block(runner: Runner, block: Block, after: object = None) -> list[str]:
    outputs = []
    for command in block.commands:
        t0 = time.monotonic()
        outputs.append(runner.run(command))
        if os.environ.get("TRANSCRIPTS_TIMING"):
            print(f"    {time.monotonic() - t0:5.1f} s  {command}", file=sys.stderr)
        if callable(after):
            after(command)
    return outputs


def clean_page(bootstrap: str, page: Page) -> None:
    """Delete the topics and groups a tansu page creates (those left by an earlier run): each run starts alike."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    groups, topics = page.names("groups"), page.names("topics")
    for futures in (
        admin.delete_consumer_groups(groups) if groups else {},
        admin.delete_topics(topics) if topics else {},
    ):
        for future in futures.values():
            with contextlib.suppress(Exception):  # none to delete: that is the state wanted
                future.result(timeout=10)
    del admin  # its connections close now, not when the broker stops under them


def run_tansu_page(page: Page, bootstrap: str, cwd: Path) -> dict[int, list[str]]:
    """Every block of a tansu page against the broker at `bootstrap`: {block index: outputs}."""
    runner = Runner.make(cwd, CLUSTERCTL_BOOTSTRAP_SERVER=bootstrap)
    clean_page(bootstrap, page)
    return {block.index: run_block(runner, block) for block in page.blocks}


@contextlib.contextmanager
def tansu() -> Iterator[str]:
    from clusterctl.testing.tansu import start_tansu

    broker = start_tansu()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def fit_spec(spec: Path) -> list[str]:
    """Move the spec's default host ports and subnet to free ones when this machine has them taken."""
    import ipaddress

    from clusterctl.runtime.allocate import _port_free, _used_networks, free_port_block, free_subnet

    text = spec.read_text(encoding="utf-8")
    notes = []
    subnet = ipaddress.IPv4Network(re.search(r'^  subnet: "([\d./]+)"', text, re.MULTILINE).group(1))  # type: ignore[union-attr]
    if any(subnet.overlaps(u) for u in _used_networks()):
        new = free_subnet()
        text = text.replace(f'subnet: "{subnet}"', f'subnet: "{new}"')
        notes.append(f"subnet {subnet} -> {new}")
    for key, first, count in (("client_port", 2181, 3), ("host_port", 9092, 3), ("port", 9000, 1)):
        if all(_port_free("127.0.0.1", p) for p in range(first, first + count)):
            continue
        new_port = free_port_block(count)
        text = re.sub(rf"^(  {key}:) {first}\b", rf"\1 {new_port}", text, count=1, flags=re.MULTILINE)
        notes.append(f"{key} {first} -> {new_port}")
    spec.write_text(text, encoding="utf-8")
    return notes


def run_kafka_pages(found: list[Page], workdir: Path, screenshots: bool = False) -> dict[Path, dict[int, list[str]]]:
    """The kafka pages in order, in one working directory: the pages create, use and remove the cluster (and with
    `screenshots`, docs/screenshots.py takes a page's pictures after its last block, before the `last` blocks)."""
    runner = Runner.make(workdir)
    results: dict[Path, dict[int, list[str]]] = {p.path: {} for p in found}
    fitted: list[str] = []

    def after(command: str) -> None:
        spec = workdir / "clusterctl.yaml"
        if command.startswith("clusterctl init") and spec.exists() and not fitted:
            fitted.extend(fit_spec(spec) or ["defaults free"])
            print(f"  spec: {', '.join(fitted)}", file=sys.stderr)

    ordered = [b for p in found for b in p.blocks if not b.last] + [b for p in found for b in p.blocks if b.last]
    last_of_page = {p.path: max((b.index for b in p.blocks if not b.last), default=0) for p in found}
    try:
        for block in ordered:
            t0 = time.monotonic()
            results[block.page][block.index] = run_block(runner, block, after)
            print(f"  {block.name}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
            if screenshots and not block.last and block.index == last_of_page[block.page]:
                sys.path.insert(0, str(DOCS))
                from screenshots import take  # docs/screenshots.py

                take(block.page, workdir, runner.env)
    finally:
        if (workdir / "clusterctl.yaml").exists():
            runner.quiet("clusterctl down --volumes")
    return results


# ---------------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=["tansu", "kafka"], help="only the pages of this env")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when an output differs")
    parser.add_argument(
        "--all", action="store_true", help="rewrite every block (default: only blocks whose output changed)"
    )
    parser.add_argument("--workdir", type=Path, help="kafka pages: where the spec, compose files and reports go")
    parser.add_argument("--screenshots", action="store_true", help="kafka pages: also the pictures (Chromium)")
    args = parser.parse_args(argv)

    found = pages(args.env)
    results: dict[Path, dict[int, list[str]]] = {}
    tansu_pages = [p for p in found if p.env == "tansu"]
    if tansu_pages:
        with tansu() as bootstrap, tempfile.TemporaryDirectory() as tmp:
            for page in tansu_pages:
                t0 = time.monotonic()
                results[page.path] = run_tansu_page(page, bootstrap, Path(tmp))
                print(f"{page.path.relative_to(ROOT)}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    kafka_pages = [p for p in found if p.env == "kafka"]
    if kafka_pages:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="clusterctl-transcripts-"))
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"kafka pages in {workdir}", file=sys.stderr)
        results.update(run_kafka_pages(kafka_pages, workdir, args.screenshots))

    changed = []
    for page in found:
        outputs = results.get(page.path, {})
        drift = {b.index: differences(b, outputs[b.index]) for b in page.blocks if b.index in outputs}
        if args.check:
            changed += [d for found_drift in drift.values() for d in found_drift]
        else:  # a block whose output differs only in timings and ids keeps its text (--all rewrites it)
            unrecorded = {b.index for b in page.blocks if not any(r.strip() for r in b.recorded)}
            rewrite = {i: out for i, out in outputs.items() if args.all or drift[i] or i in unrecorded}
            if write_page(page, rewrite):
                changed.append(str(page.path.relative_to(ROOT)))
    print("\n".join(changed) or "no change", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
