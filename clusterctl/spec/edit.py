"""Change one value of a spec file in place, keeping its comments and layout (a command that moves the running
cluster, such as `upgrade`, records where it moved it in the user's own file, not in a rewritten copy).

The value's span is found through the YAML parser's node marks, replaced in the text, and the result is loaded as
a spec before it replaces the file (atomically): an edit that would not load is refused and the file is untouched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, ScalarNode

from clusterctl.errors import SpecError


def set_value(text: str, section: str, key: str, value: str) -> str:
    """`text` with `section.key` set to the string `value` (quoted); the key is added to the section if absent."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, MappingNode):
        raise SpecError("the spec is not a mapping")
    block = next((v for k, v in root.value if isinstance(k, ScalarNode) and k.value == section), None)
    if not isinstance(block, MappingNode) or not block.value:
        raise SpecError(f"the spec has no {section} section to set {section}.{key} in")
    quoted = json.dumps(value)
    node = next((v for k, v in block.value if isinstance(k, ScalarNode) and k.value == key), None)
    if node is not None:
        if not isinstance(node, ScalarNode):
            raise SpecError(f"{section}.{key} is not a single value")
        start, end = node.start_mark.index, node.end_mark.index
        return text[:start] + quoted + text[end:]
    first = block.value[0][0]
    line_start = text.rfind("\n", 0, first.start_mark.index) + 1
    indent = " " * first.start_mark.column
    return text[:line_start] + f"{indent}{key}: {quoted}\n" + text[line_start:]


def write_value(path: Path, section: str, key: str, value: str) -> None:
    """Set `section.key` in the spec file at `path`, after checking the edited spec loads."""
    from clusterctl.spec.model import load_spec

    edited = set_value(path.read_text(encoding="utf-8"), section, key, value)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(edited, encoding="utf-8")
        load_spec(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
