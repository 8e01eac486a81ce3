"""Every YAML document clusterctl reads (spec, scenario, rendered compose file) goes through here, bounded.

A file larger than MAX_YAML_BYTES is refused before it is parsed. Aliases are counted as what they
expand to: a document whose nodes, aliases expanded, exceed MAX_YAML_NODES (a "billion laughs" of
nested anchors is a few hundred bytes), nests deeper than MAX_YAML_DEPTH, or refers to itself, is
refused while it is composed, before any Python object exists.

A mapping that gives the same key twice (YAML keeps the last one silently) is refused with the key's path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from clusterctl.errors import SpecError

MAX_YAML_BYTES = 1024 * 1024
MAX_YAML_NODES = 100_000
MAX_YAML_DEPTH = 64


class _Refused(yaml.YAMLError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts nodes with aliases expanded and refuses past the bounds."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth) with aliases expanded
        self._total = 0
        self._depth = 0
        self._open_anchors: set[str] = set()

    def _count(self, n: int) -> None:
        self._total += n
        if self._total > MAX_YAML_NODES:
            raise _Refused(f"has more than {MAX_YAML_NODES} nodes with its aliases expanded (an alias bomb?)")

    def _measure(self, node: Node) -> tuple[int, int]:
        """(nodes, depth) of `node` with its aliases expanded, memoised: shared subtrees are measured once."""
        known = self._expanded.get(id(node))
        if known is not None:
            return known
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        measured = [self._measure(child) for child in children]
        size = min(1 + sum(m[0] for m in measured), MAX_YAML_NODES + 1)
        depth = 1 + max((m[1] for m in measured), default=0)
        self._expanded[id(node)] = (size, depth)
        return size, depth

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise _Refused(f"refers to itself (alias *{event.anchor} inside its own anchor)")
            target = self.anchors.get(event.anchor)
            if target is not None:
                size, depth = self._measure(target)
                if self._depth + depth > MAX_YAML_DEPTH:
                    raise _Refused(f"nests deeper than {MAX_YAML_DEPTH} levels with its aliases expanded")
                self._count(size)
            return super().compose_node(parent, index)
        self._count(1)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _Refused(f"nests deeper than {MAX_YAML_DEPTH} levels")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)


def load_text(text: str, source: str) -> Any:
    """Parse one YAML document within the bounds; a refused one is a SpecError naming `source`.
    Syntax errors stay `yaml.YAMLError` (each caller words them)."""
    if len(text) > MAX_YAML_BYTES:  # characters >= bytes / 4; the byte bound is checked on files
        raise SpecError(f"{source}: larger than {MAX_YAML_BYTES // 1024} KiB; refused before parsing")
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise SpecError(f"{source}: YAML {exc}; refused") from None
    except RecursionError:
        raise SpecError(f"{source}: YAML nests too deeply; refused") from None
    finally:
        loader.dispose()


def _refuse_duplicate_keys(root: Node) -> None:
    """Refuse a mapping that names a key twice, naming the key's path (`kafka.brokers`, `steps[3].fault.broker`).

    Each node is visited once (aliases share theirs); a merge key (`<<`) may repeat what it merges."""
    seen: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node.value))
        elif isinstance(node, MappingNode):
            keys: set[str] = set()
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is None or key.tag == "tag:yaml.org,2002:merge":
                    continue
                where = f"{path}.{name}" if path else str(name)
                if name in keys:
                    line = key.start_mark.line + 1
                    raise _Refused(f"has the key {where!r} twice (line {line}; YAML would silently keep the last)")
                keys.add(name)
                stack.append((value, where))


def read_text(path: Path, source: str | None = None) -> str:
    """A YAML file's text, refused past MAX_YAML_BYTES (read in bounded form, so a FIFO cannot feed it forever)."""
    source = source or str(path)
    with path.open("rb") as fh:
        data = fh.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise SpecError(f"{source}: larger than {MAX_YAML_BYTES // 1024} KiB; refused before parsing")
    return data.decode("utf-8")


def load_file(path: Path, source: str | None = None) -> Any:
    """`read_text` then `load_text`: OSError, UnicodeDecodeError and yaml.YAMLError stay for the caller to word."""
    return load_text(read_text(path, source), source or str(path))
