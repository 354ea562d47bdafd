"""A tool call's arguments checked against the tool's own input schema (oaken.mcp_schemas).

An agent corrects itself from the error it gets, so the first fault is worded as one line that
names the tool, the field and the value, and what the field takes: jsonschema finds the fault,
this module says it. Checks a schema cannot state (a date that does not exist) follow.
"""

from __future__ import annotations

import json
from typing import Any

from oaken.errors import OakenError
from oaken.mcp_schemas import ToolSpec
from oaken.search.dates import day_start


class ToolArgumentError(OakenError):
    """A tool call's arguments as sent cannot be run; the message names the field and value."""


def shown(value: Any) -> str:
    """A value as the agent sent it, in JSON, kept short."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


class Checker:
    """A tool's argument check, its schema's validator built once (at the server's start, not on
    an agent's first call)."""

    def __init__(self, tool: ToolSpec):
        from jsonschema import Draft202012Validator

        self.tool = tool
        self._validator = Draft202012Validator(tool.input_schema)

    def __call__(self, arguments: Any) -> dict[str, Any]:
        """The arguments, every field checked against the tool's schema; ToolArgumentError on the first fault."""
        from jsonschema.exceptions import best_match

        tool = self.tool
        args = {} if arguments is None else arguments
        if not isinstance(args, dict):
            raise ToolArgumentError(f"{tool.name}: arguments: expected a JSON object, got {shown(args)}")
        error = best_match(self._validator.iter_errors(args))
        if error is not None:
            raise ToolArgumentError(f"{tool.name}: {_worded(tool, error)}")
        for name in ("after", "before"):
            if name in args and day_start(args[name]) is None:
                raise ToolArgumentError(f"{tool.name}: {name}: {shown(args[name])} is not a day of the calendar")
        return args


def _worded(tool: ToolSpec, error: Any) -> str:
    """One line for a jsonschema ValidationError: the field, what it takes, what was sent."""
    path = ".".join(str(p) for p in error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties":
        unknown = [k for k in error.instance if k not in tool.fields]
        return f"unknown field {shown(unknown[0])}{_near(unknown[0], tool)}; {tool.name} takes {_fields(tool)}"
    if kind == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return f"{missing[0]}: required ({_expects(tool.input_schema['properties'][missing[0]])})"
    field = path or "arguments"
    return f"{field}: expected {_expects(error.schema)}, got {shown(error.instance)}"


def _fields(tool: ToolSpec) -> str:
    return ", ".join(tool.fields) if tool.fields else "no fields"


def _near(name: str, tool: ToolSpec) -> str:
    import difflib

    close = difflib.get_close_matches(name, tool.fields, n=1, cutoff=0.6)
    return f" (did you mean {shown(close[0])}?)" if close else ""


def _expects(schema: dict[str, Any]) -> str:
    """What a field's schema takes, in words."""
    if "enum" in schema:
        return "one of " + ", ".join(shown(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"a whole number from {low} to {high}"
        return "a whole number" + (f" of {low} or more" if low is not None else "")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = schema.get("items", {})
        return f"a list of {_expects(items)}" if items else "a list"
    if kind == "string":
        if "pattern" in schema:
            return "a date YYYY-MM-DD"
        if "maxLength" in schema:
            return f"a string of at most {schema['maxLength']} characters"
        return "a non-empty string" if schema.get("minLength") else "a string"
    if kind == "object":
        return "a JSON object"
    return json.dumps(schema)
