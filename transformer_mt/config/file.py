"""Reading a config: YAML (safely), every value checked against the schema's types, and
``--set section.key=value`` overrides.

The schema is ``config/__init__.py``'s; this module turns text and plain data into it. An
unknown key, a wrong type, a duplicate key or a YAML bomb raises :class:`ConfigError` with a
one-line message naming the key (and the closest valid key for a typo).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeGuard

import yaml

from transformer_mt.config import Config, field_types, to_plain
from transformer_mt.config.data import PLAIN_NAME
from transformer_mt.errors import ConfigError
from transformer_mt.fileio import not_a_file


def _is_section(tp: Any) -> TypeGuard[type]:
    """Whether the annotation ``tp`` is a config section (a dataclass, read key by key)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the type annotation ``tp`` and return it (ints widen to floats)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        member = _union_member(value, tp)
        if member is not None:
            return coerce(value, member, key)
    elif _is_section(tp):
        return _from_dict(tp, value, f"{key}.")
    elif origin in _CONTAINERS:
        return _CONTAINERS[origin](value, typing.get_args(tp), key)
    else:
        found, plain = _scalar(value, tp, key)
        if found:
            return plain
    name = getattr(tp, "__name__", str(tp))
    raise ConfigError(f"config key '{key}' must be of type {name}, got {value!r} "
                      f"({type(value).__name__})")


def _union_member(value: Any, tp: Any) -> Any:
    """The member of the union ``tp`` that ``value`` is read as: the one besides None, else a
    list for a list and a section otherwise (data.train: one corpus or several); None: none."""
    inner = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(inner) == 1:
        return inner[0]
    lists = [a for a in inner if typing.get_origin(a) is list]
    if isinstance(value, list) and lists:
        return lists[0]
    sections = [a for a in inner if dataclasses.is_dataclass(a)]
    return sections[0] if sections else None


def _coerce_list(value: Any, args: tuple, key: str) -> list:
    sections = dataclasses.is_dataclass(args[0])  # corpora: at least one
    if not isinstance(value, list) or (sections and not value):
        what = "a non-empty list" if sections else "a list"
        raise ConfigError(f"config key '{key}' must be {what}, got {value!r}")
    return [coerce(v, args[0], f"{key}.{i}") for i, v in enumerate(value)]


def _coerce_literal(value: Any, args: tuple, key: str) -> Any:
    if value not in args:
        choices = ", ".join(repr(a) for a in args)
        raise ConfigError(f"config key '{key}' must be one of {choices}, got {value!r}")
    return value


def _coerce_dict(value: Any, args: tuple, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"config key '{key}' must be a mapping of names, got {value!r}")
    _, value_type = args
    out = {}
    for name, item in value.items():
        if not (isinstance(name, str) and PLAIN_NAME.fullmatch(name)):
            raise ConfigError(f"config key '{key}' names must be plain names (letters, "
                              f"digits, '.', '_', '-'), got {name!r}")
        out[name] = (_from_dict(value_type, item, f"{key}.{name}.")
                     if _is_section(value_type)
                     else coerce(item, value_type, f"{key}.{name}"))
    return out


def _coerce_tuple(value: Any, args: tuple, key: str) -> tuple:
    if not isinstance(value, (list, tuple)) or len(value) != len(args):
        raise ConfigError(f"config key '{key}' must be a list of {len(args)} values, "
                          f"got {value!r}")
    return tuple(coerce(v, a, f"{key}[{i}]")
                 for i, (v, a) in enumerate(zip(value, args, strict=True)))


_CONTAINERS = {list: _coerce_list, Literal: _coerce_literal, dict: _coerce_dict,
               tuple: _coerce_tuple}


def _scalar(value: Any, tp: Any, key: str) -> tuple[bool, Any]:
    """(True, the value) where ``value`` is a ``tp`` (float, int, bool, str), else (False,
    None). A float may be written as an int or, as YAML reads 1e-3, a string."""
    if tp is float and isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigError(f"config key '{key}' must be a finite number, got {value}")
        return True, float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return True, value
    if tp in (bool, str) and isinstance(value, tp):
        return True, value
    return False, None


def _from_dict(cls: type, data: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "the top level"
    if not isinstance(data, dict):
        raise ConfigError(f"config section '{where}' must be a mapping, got {type(data).__name__}")
    hints = field_types(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else ""
            raise ConfigError(f"unknown config key '{prefix}{key}'{hint} "
                              f"(valid keys in {where}: {', '.join(names)})")
        tp = hints[key]
        if _is_section(tp):
            kwargs[key] = _from_dict(tp, value, f"{prefix}{key}.")
        else:
            kwargs[key] = coerce(value, tp, f"{prefix}{key}")
    return cls(**kwargs)


MAX_YAML_VALUES = 10_000  # a config has a few dozen; aliases may not expand beyond this


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that also refuses duplicate keys (instead of keeping the last)."""

    where = "the YAML"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(f"duplicate key '{key}' at line {key_node.start_mark.line + 1} "
                                  f"of {self.where}; keep one of them")
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml(text: str, where: str = "the YAML") -> Any:
    """Parse YAML safely, refusing duplicate keys, recursive aliases, and aliases that expand
    beyond :data:`MAX_YAML_VALUES` values (a "billion laughs" bomb) before building anything."""
    loader = _StrictLoader(text)
    loader.where = where
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, where)
        return loader.construct_document(node)
    except RecursionError as exc:
        raise ConfigError(f"{where} is nested too deeply to be a config") from exc
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, where: str) -> None:
    count = 0
    stack: list[tuple[yaml.Node, frozenset[int]]] = [(root, frozenset())]
    while stack:
        node, ancestors = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise ConfigError(f"{where} expands to more than {MAX_YAML_VALUES:,} values "
                              "(through YAML aliases); a config is far smaller")
        if id(node) in ancestors:
            raise ConfigError(f"{where} holds a recursive YAML alias (line "
                              f"{node.start_mark.line + 1}); a config cannot contain itself")
        inside = ancestors | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, inside) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((child, inside) for pair in node.value for child in pair)


def config_from_dict(data: dict[str, Any], overrides: list[str] | None = None) -> Config:
    """Build and validate a :class:`Config` from plain data plus ``key=value`` overrides."""
    data = to_plain(data or {})
    for item in overrides or []:
        apply_override(data, item)
    config = _from_dict(Config, data, "")
    config.validate()
    return config


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply one ``section.key=value`` override to nested ``data`` in place (value is YAML)."""
    if "=" not in item:
        raise ConfigError(f"override '{item}' must look like section.key=value, "
                          "e.g. --set model.d_model=256")
    dotted, raw = item.split("=", 1)
    parts = dotted.strip().split(".")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override '{item}': '{part}' is not a config section")
        node = child
    node[parts[-1]] = value


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config file (or the defaults when ``path`` is None) and apply overrides."""
    data: Any = {}
    if path is not None:
        path = Path(path)
        why = not_a_file(path)
        if why:
            raise ConfigError(f"config file '{path}' {why}; pass an existing YAML file, "
                              "e.g. --config config/quickstart.yaml")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file '{path}': {exc}") from exc
        try:
            data = load_yaml(text, str(path)) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "invalid YAML"
            raise ConfigError(f"config file '{path}' is not valid YAML{where}: {problem}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping of sections "
                              f"(data, model, train, decode), got {type(data).__name__}")
    return config_from_dict(data, overrides)
