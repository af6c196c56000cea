"""Reading a YAML file strictly: UTF-8 text only, safe tags only, and no key given twice in a
mapping (PyYAML would silently keep the last one). Errors are one line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from engine.config import ConfigError


class YamlFileError(ConfigError):
    """The file cannot be read or is not valid, strict YAML."""


def read_yaml(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise YamlFileError(f"cannot read sweep file {str(path)!r}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlFileError(
            f"{path}: is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})"
        ) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as e:
        mark = e.problem_mark
        raise YamlFileError(
            f"{path}: duplicate key {e.problem} at line {mark.line + 1}, column "
            f"{mark.column + 1} (a key may appear once per mapping)"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise YamlFileError(f"{path}: malformed YAML{where}: {problem}") from None


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges may override
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: SafeLoader refuses it with its own message
                    continue
                if duplicate:
                    raise _DuplicateKey(problem=repr(key), problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep)
