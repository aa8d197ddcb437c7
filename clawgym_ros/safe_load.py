"""The one loader of YAML / JSON files handed to the CLI and the cores (hostile input safe).

Every config, suite, mixture, weights and judgments file is read here, with bounds:

- a size limit (:data:`MAX_CONFIG_BYTES`; callers reading data files pass a larger one), and
  only regular files (a FIFO or a device would block or never end);
- YAML aliases refused: a 3 KB "billion laughs" file expands to ~10^9 nodes in whatever walks
  the loaded structure (validation, ``repr`` in an error, ``json.dumps`` of a manifest). No
  shipped config uses anchors; a user writes the value out instead;
- a nesting limit (:data:`MAX_DEPTH`), so deep ``[[[[...]]]]`` is an error, not a
  RecursionError;
- UTF-8 checked, the error naming the file and the offset of the first bad byte;
- values in messages shortened (:func:`clawgym_ros.errors.shorten`).

Every problem is a :class:`~clawgym_ros.errors.ConfigError` naming the file. Imports no rclpy.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from clawgym_ros.errors import ConfigError

#: Largest YAML/JSON config file read (configs here are a few KB; 1 MiB of YAML parses in ~2 s).
MAX_CONFIG_BYTES = 1 << 20
#: Largest data file read through :func:`read_text` by callers that pass it (judgments).
MAX_DATA_BYTES = 16 << 20
#: Deepest nesting of mappings / lists accepted.
MAX_DEPTH = 64


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader, reading ``3e-6`` and ``1.0e5`` as floats as YAML 1.2 does
    (YAML 1.1, PyYAML's grammar, wants a dot and a signed exponent, ``3.0e-6``, and makes
    the others strings, so ``lr: 3e-6`` failed as "lr='3e-6' is invalid")."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))
_LOADER = _Loader


def load_scalar(text: str) -> Any:
    """One YAML value from a command-line ``KEY=VALUE`` item, with :func:`load_yaml`'s
    grammar (``3e-6`` is a float). Raises ``yaml.YAMLError`` on malformed text."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 (a SafeLoader)


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """Read a regular UTF-8 text file of at most ``max_bytes`` bytes.

    Args:
        path: the file.
        what: what the file should be, for messages (``"YAML file"``).
        max_bytes: size limit.

    Returns:
        The text (a leading UTF-8 byte-order mark dropped).

    Raises:
        ConfigError: missing, unreadable (with the errno's meaning), not a regular file, too
            large, or not UTF-8; the message names the file.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError("path", str(path), f"an existing {what}") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise ConfigError("path", str(path), f"a readable {what} ({_why(err)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("path", str(path), f"a regular {what} (not a directory, pipe or "
                          "device)")
    if info.st_size > max_bytes:
        raise ConfigError("size", f"{info.st_size} bytes", f"at most {max_bytes} bytes",
                          str(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as err:
        raise ConfigError("path", str(path), f"a readable {what} ({_why(err)})") from None
    if len(data) > max_bytes:   # grew since the stat
        raise ConfigError("size", f"over {max_bytes} bytes", f"at most {max_bytes} bytes",
                          str(path))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError("encoding", f"byte 0x{data[err.start]:02x} at offset {err.start}",
                          f"UTF-8 text (is this a {what}?)", str(path)) from None


def is_file(path: str | Path) -> bool:
    """``Path.is_file`` for names from users: False, not an OSError, for a name too long for
    the file system or one with a NUL byte."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text safely: no aliases, at most :data:`MAX_DEPTH` levels of nesting, string
    mapping keys, each once per mapping.

    Raises:
        ConfigError: syntax error (with the line), an alias, too deep nesting, a key that is not
            a string or that repeats; names ``source``.
    """
    try:
        # Events first (libyaml, fast): aliases, depth and duplicate keys are refused before
        # anything is built. Each open collection: [is a mapping, nodes seen, keys seen].
        open_nodes: list[list] = []
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError("alias", f"*{event.anchor}", "no YAML aliases or anchors "
                                  f"(write the value out), {_line(event.start_mark)}", source)
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                open_nodes.pop()
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            if open_nodes and open_nodes[-1][0]:
                top = open_nodes[-1]
                if top[1] % 2 == 0 and isinstance(event, yaml.ScalarEvent):
                    if event.value in top[2]:     # YAML keeps the last silently
                        raise ConfigError("key", event.value, "each key once per mapping, "
                                          f"{_line(event.start_mark)}", source)
                    top[2].add(event.value)
                top[1] += 1
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                open_nodes.append([isinstance(event, yaml.MappingStartEvent), 0, set()])
                if len(open_nodes) > MAX_DEPTH:
                    raise ConfigError("nesting", f"over {MAX_DEPTH} levels", f"at most "
                                      f"{MAX_DEPTH} levels, {_line(event.start_mark)}", source)
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 (a SafeLoader)
        _check_keys(data, source)
        return data
    except ConfigError:
        raise
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        if mark is not None:
            where = _line(mark)
        elif isinstance(err, yaml.reader.ReaderError):
            where = f"character {err.position}"
        else:
            where = "somewhere"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError("yaml", where, f"valid YAML ({problem})", source) from None
    except (ValueError, TypeError, RecursionError, OverflowError) as err:
        # A value the constructors reject (an int of 5000 digits, a bad timestamp).
        raise ConfigError("yaml", type(err).__name__, f"valid YAML values ({err})",
                          source) from None


def _check_keys(data: Any, source: str) -> None:
    """Every mapping key is a string: YAML reads ``1:``, ``on:``, ``null:`` or ``[a]:`` keys as
    other types, which configs never mean and consumers cannot sort or compare."""
    stack = [(data, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise ConfigError(f"{where or '(top level)'} key", key, "a string key "
                                      "(quote it)", source)
                stack.append((value, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


def parse_json(text: str, source: str) -> Any:
    """Parse JSON text.

    Raises:
        ConfigError: syntax error (line and column), too deep nesting (the decoder's recursion
            limit), a number Python refuses; names ``source``.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError("json", f"line {err.lineno} column {err.colno}",
                          f"valid JSON ({err.msg})", source) from None
    except RecursionError:
        raise ConfigError("nesting", "too deep", "JSON nested at most ~1000 levels",
                          source) from None
    except ValueError as err:   # an integer of more than 4300 digits
        raise ConfigError("json", type(err).__name__, f"valid JSON values ({err})",
                          source) from None


def load_yaml(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Read and parse a YAML (or JSON: JSON is YAML) file with :func:`read_text` and
    :func:`parse_yaml`."""
    return parse_yaml(read_text(path, "YAML file", max_bytes), str(path))


def load_json(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Read and parse a JSON file with :func:`read_text` and :func:`parse_json`."""
    return parse_json(read_text(path, "JSON file", max_bytes), str(path))


def _line(mark: Any) -> str:
    return f"line {mark.line + 1}"


def _why(err: BaseException) -> str:
    if isinstance(err, OSError) and err.errno:
        return os.strerror(err.errno)
    return str(err)
