"""The JSON Schema (draft-07) of ``messages.json``, built from the loader's own rules.

Editors use ``schema/bcnp_schema.json`` to check a schema while it is typed.
It is generated from the same constants the loader enforces (types, name
patterns, reserved words, id and scale ranges, version) so the two cannot
drift apart. Two loader rules have no draft-07 form: unique message ids and
names, and unique field names inside a message (``uniqueItems`` compares whole
items only); the loader reports those.
"""

from __future__ import annotations

import json
from typing import Any

from ..fields import FIELD_TYPES, INT32_MAX
from ..schema_rules import (
    CPP_KEYWORDS,
    FIELD_KEYS,
    FIELD_NAME_PATTERN,
    MESSAGE_KEYS,
    MESSAGE_NAME_PATTERN,
    NAMESPACE_PATTERN,
    RESERVED_FIELD_WORDS,
    RESERVED_MESSAGE_NAMES,
    TOP_KEYS,
)

__all__ = ["json_schema_document", "render_json_schema"]

_ID = "https://github.com/bcnp-robot/bcnp-robot/schema/bcnp_schema.json"


def json_schema_document() -> dict[str, Any]:
    field = {
        "type": "object",
        "description": "One field, in wire order.",
        "required": ["name", "type"],
        "additionalProperties": False,
        "properties": {
            "name": {
                "type": "string",
                "description": "camelCase; kept as is on the wire side (e.g. durationMs).",
                "pattern": FIELD_NAME_PATTERN.pattern,
                "not": {"enum": sorted(RESERVED_FIELD_WORDS)},
            },
            "type": {"enum": list(FIELD_TYPES)},
            "scale": {
                "type": "integer",
                "minimum": 1,
                "maximum": INT32_MAX,
                "description": "float32 only: wire value = round(value * scale). Default 10000.",
            },
            "unit": {"type": "string"},
            "description": {"type": "string"},
        },
        "if": {"properties": {"type": {"const": "float32"}}},
        "else": {"not": {"required": ["scale"]}},
    }
    message = {
        "type": "object",
        "required": ["id", "name", "fields"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 65535},
            "name": {
                "type": "string",
                "description": "PascalCase.",
                "pattern": MESSAGE_NAME_PATTERN.pattern,
                "not": {"enum": sorted(RESERVED_MESSAGE_NAMES)},
            },
            "description": {"type": "string"},
            "fields": {"type": "array", "minItems": 1, "items": {"$ref": "#/definitions/field"}},
        },
    }
    assert set(field["properties"]) == FIELD_KEYS  # type: ignore[call-overload]
    assert set(message["properties"]) == MESSAGE_KEYS  # type: ignore[call-overload]
    doc = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": _ID,
        "title": "BCNP message schema",
        "description": "messages.json of BCNP 3.2. Message ids and names, and field names within a "
        "message, must also be unique (checked by the loader).",
        "type": "object",
        "required": ["version", "messages"],
        "additionalProperties": False,
        "properties": {
            "$schema": {"type": "string"},
            "version": {
                "type": "string",
                "pattern": "^3\\.2(\\.[0-9]+)?$",
                "description": "Header major.minor come from it: 3.2 (or 3.2.x).",
            },
            "namespace": {
                "type": "string",
                "pattern": NAMESPACE_PATTERN.pattern,
                "not": {"pattern": "(^|::)(std|" + "|".join(sorted(CPP_KEYWORDS)) + ")(::|$)|__"},
            },
            "description": {"type": "string"},
            "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/definitions/message"}},
        },
        "definitions": {"message": message, "field": field},
    }
    assert set(doc["properties"]) == TOP_KEYS  # type: ignore[call-overload]
    return doc


def render_json_schema() -> str:
    return json.dumps(json_schema_document(), indent=2) + "\n"
