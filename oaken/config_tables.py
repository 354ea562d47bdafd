"""A TOML table read into a frozen settings dataclass (oaken.config): an unknown key is refused
with the nearest known one, and every value is converted to its field's type, or refused with the
file, the key, the value and what was expected."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

from oaken.errors import ConfigError


def check_keys(source: str, where: str, data: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """Refuse a key that is not `known`, with the nearest known one when there is one."""
    for key in data:
        if key not in known:
            import difflib  # only to word an error: not imported by every command

            near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else f"; known keys: {', '.join(known)}"
            prefix = f"{where} " if where else ""
            raise ConfigError(f"{source}: {prefix}unknown key {key!r}{hint}")


def build(source: str, where: str, cls: type, table: Any, extra: dict[str, Any] | None = None) -> Any:
    """`cls` made from the TOML table at `where`, each value checked against its field's type and
    choices; `extra`: fields the table does not hold (an account's name)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {where}: expected a table, got {table!r}")
    names = tuple(f.name for f in fields(cls) if f.name != "name" or extra is None)
    check_keys(source, where, table, names)
    kwargs: dict[str, Any] = dict(extra or {})
    for f in fields(cls):
        if f.name not in table:
            continue
        value = convert(source, f"{where} {f.name}", table[f.name], f.type)
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(
                f"{source}: {where} {f.name}: expected one of {', '.join(map(repr, choices))}, got {value!r}"
            )
        kwargs[f.name] = value
    return cls(**kwargs)


def convert(source: str, key: str, value: Any, typ: Any) -> Any:
    """`value` as the type `typ` names (the annotation, a string here), or ConfigError naming `key`."""
    t = typ if isinstance(typ, str) else typ.__name__  # annotations are strings here

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: expected {expected}, got {value!r}")

    if t in ("str", "str | None"):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        if value < 0:
            raise bad("an integer of 0 or more")
        return value
    if t == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        if value < 0:
            raise bad("a number of 0 or more")
        return float(value)
    if t == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if t.startswith("tuple[str"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of strings")
        return tuple(value)
    if t.startswith("Mapping[str, float]"):
        if not isinstance(value, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
        ):
            raise bad("a table of numbers")
        return {str(k): float(v) for k, v in value.items()}
    raise bad(t)  # pragma: no cover - a field type this loader does not know
