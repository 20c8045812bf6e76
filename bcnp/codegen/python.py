"""Python code generation: the standalone host module and the project's typed module.

* :func:`render_python` → ``bcnp_messages.py``: standard library only, with the
  public names of the reference generator's module (``SCHEMA_HASH``,
  ``MessageTypeId``, one dataclass per message with ``encode``/``decode``,
  ``MESSAGE_REGISTRY``, ``encode_handshake``, ``validate_handshake``,
  ``encode_packet``...) so host scripts written for the reference run
  unchanged. Unlike the reference's it checks the CRC with ``zlib``, rounds
  float32 half away from zero (the C++ ``llround`` bytes) and raises
  ``ValueError`` on out-of-range values.
* :func:`render_typed_module` → the project's ``messages.py``: the schema
  embedded as data, loaded by the runtime at import, and typed classes for
  mypy that are the runtime's own message classes.
"""

from __future__ import annotations

import pprint

from ..schema import FIELD_TYPES, FieldSpec, MessageSpec, Schema
from ..wire import (
    CLEAR_QUEUE,
    CRC_SIZE,
    HANDSHAKE_MAGIC,
    HANDSHAKE_SIZE,
    HEADER_SIZE,
    MAX_MESSAGES_PER_PACKET,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
)
from . import GENERATOR, source_name

__all__ = ["render_python", "render_typed_module", "schema_document"]


def _py_type(field: FieldSpec) -> str:
    return "float" if field.is_float else "int"


def _field_comment(field: FieldSpec) -> str:
    parts = [field.type]
    if field.is_float:
        parts.append(f"x{field.effective_scale}")
    if field.unit:
        parts.append(f"[{field.unit}]")
    if field.description:
        parts.append(f"- {field.description}")
    return " ".join(parts)


def _doc(text: str | None, fallback: str) -> str:
    body = (text or fallback).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{body}"""'


def _to_wire_expr(spec: MessageSpec, field: FieldSpec) -> str:
    where = f'"{spec.name}.{field.name}"'
    if field.is_float:
        return f"_float_to_wire({where}, self.{field.name}, {field.effective_scale})"
    ftype = FIELD_TYPES[field.type]
    return f"_int_to_wire({where}, self.{field.name}, {ftype.raw_min}, {ftype.raw_max})"


def _from_wire_expr(field: FieldSpec, var: str) -> str:
    return f"{var} / {field.effective_scale}" if field.is_float else var


def _render_dataclass(spec: MessageSpec) -> list[str]:
    lines = [
        "@dataclass",
        f"class {spec.name}:",
        f"    {_doc(spec.description, spec.name + ' message.')}",
        "",
        f"    TYPE_ID: ClassVar[int] = {spec.id}",
        f"    WIRE_SIZE: ClassVar[int] = {spec.wire_size}",
        f'    _STRUCT: ClassVar[struct.Struct] = struct.Struct("{spec.struct.format}")',
        "",
    ]
    for field in spec.fields:
        default = "0.0" if field.is_float else "0"
        lines.append(f"    {field.name}: {_py_type(field)} = {default}  # {_field_comment(field)}")
    lines += [
        "",
        "    def encode(self) -> bytes:",
        '        """The message\'s wire bytes; ValueError when a value is out of range."""',
        "        return self._STRUCT.pack(",
    ]
    lines += [f"            {_to_wire_expr(spec, f)}," for f in spec.fields]
    names = ", ".join(f.name for f in spec.fields)
    trailing = "," if len(spec.fields) == 1 else ""
    lines += [
        "        )",
        "",
        "    @classmethod",
        f"    def decode(cls, data: bytes) -> Optional[{spec.name}]:",
        '        """The message at the start of ``data``; None when it is too short."""',
        "        if len(data) < cls.WIRE_SIZE:",
        "            return None",
        f"        ({names}{trailing}) = cls._STRUCT.unpack_from(data)",
        "        return cls(",
    ]
    lines += [f"            {f.name}={_from_wire_expr(f, f.name)}," for f in spec.fields]
    lines += ["        )", "", ""]
    return lines


_PRELUDE = '''\
from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Dict, Iterable, List, Optional, Tuple, Type, Union

PROTOCOL_MAJOR = {major}
PROTOCOL_MINOR = {minor}
SCHEMA_VERSION = "{version}"
SCHEMA_HASH = 0x{hash:08X}
HANDSHAKE_MAGIC = {magic!r}
HANDSHAKE_SIZE = {handshake_size}
HEADER_SIZE_V3 = {header_size}
CRC_SIZE = {crc_size}
CLEAR_QUEUE = 0x{clear:02X}
MAX_MESSAGES_PER_PACKET = {max_messages}

_HEADER = struct.Struct(">BBBHH")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def crc32(data: bytes) -> int:
    """IEEE CRC-32 (the packet trailer), as zlib computes it."""
    return zlib.crc32(data) & 0xFFFFFFFF


def _round_half_away(value: float) -> int:
    # C llround: halves go away from zero (Python's round() goes to even).
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:
        whole += 1
    return int(-whole if value < 0 else whole)


def _float_to_wire(name: str, value: float, scale: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{{name}}: expected a number, got {{value!r}}")
    lo, hi = _INT32_MIN / scale, _INT32_MAX / scale
    if not math.isfinite(value):
        raise ValueError(f"{{name}}: {{value!r}} is not a finite number in [{{lo}}, {{hi}}]")
    raw = _round_half_away(float(value) * scale)
    if not _INT32_MIN <= raw <= _INT32_MAX:
        raise ValueError(
            f"{{name}}: {{value!r}} is outside the float32 wire range [{{lo}}, {{hi}}] (scale {{scale}})"
        )
    return raw


def _int_to_wire(name: str, value: Union[int, float], lo: int, hi: int) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{{name}}: {{value!r}} is not an integer")
        value = int(value)
    if not isinstance(value, int):
        raise TypeError(f"{{name}}: expected an integer, got {{value!r}}")
    if not lo <= value <= hi:
        raise ValueError(f"{{name}}: {{value!r}} is outside the range [{{lo}}, {{hi}}]")
    return int(value)


'''

_POSTLUDE = '''\
def encode_handshake() -> bytes:
    """The 8-byte handshake: b"BCNP" + SCHEMA_HASH (big-endian)."""
    return HANDSHAKE_MAGIC + SCHEMA_HASH.to_bytes(4, "big")


def validate_handshake(data: bytes) -> bool:
    """True when ``data`` is exactly a handshake carrying this schema's hash."""
    return (
        len(data) == HANDSHAKE_SIZE
        and bytes(data[:4]) == HANDSHAKE_MAGIC
        and int.from_bytes(bytes(data[4:8]), "big") == SCHEMA_HASH
    )


def encode_packet(msg_type_id: int, messages: Iterable[Message], flags: int = 0) -> bytes:
    """One packet of ``messages`` (all of type ``msg_type_id``) with ``flags``.

    Raises ValueError for an unknown type, more than MAX_MESSAGES_PER_PACKET
    messages, flags outside one byte or a value out of range; TypeError for a
    message of another type.
    """
    cls = MESSAGE_REGISTRY.get(int(msg_type_id))
    if cls is None:
        raise ValueError(f"unknown message type id {{msg_type_id!r}}")
    batch = list(messages)
    if len(batch) > MAX_MESSAGES_PER_PACKET:
        raise ValueError(f"{{len(batch)}} messages exceed {{MAX_MESSAGES_PER_PACKET}} per packet")
    if not 0 <= flags <= 0xFF:
        raise ValueError(f"flags must fit one byte, got {{flags!r}}")
    for msg in batch:
        if type(msg) is not cls:
            raise TypeError(f"expected {{cls.__name__}}, got {{type(msg).__name__}}")
    header = _HEADER.pack(PROTOCOL_MAJOR, PROTOCOL_MINOR, flags, cls.TYPE_ID, len(batch))
    body = header + b"".join(msg.encode() for msg in batch)
    return body + crc32(body).to_bytes(4, "big")


def decode_packet(data: bytes) -> Optional[Tuple[int, int, List[Message]]]:
    """(type id, flags, messages) of one complete packet, or None if it is not valid."""
    data = bytes(data)
    if len(data) < HEADER_SIZE_V3 + CRC_SIZE:
        return None
    major, minor, flags, type_id, count = _HEADER.unpack_from(data)
    cls = MESSAGE_REGISTRY.get(type_id)
    if (major, minor) != (PROTOCOL_MAJOR, PROTOCOL_MINOR) or cls is None:
        return None
    end = HEADER_SIZE_V3 + count * cls.WIRE_SIZE
    if len(data) != end + CRC_SIZE or crc32(data[:end]) != int.from_bytes(data[end:], "big"):
        return None
    size = cls.WIRE_SIZE
    messages: List[Message] = []
    for offset in range(HEADER_SIZE_V3, end, size):
        msg = cls.decode(data[offset : offset + size])
        assert msg is not None
        messages.append(msg)
    return type_id, flags, messages
'''


def render_python(schema: Schema) -> str:
    """The standalone ``bcnp_messages.py`` for ``schema``."""
    specs = schema.messages
    out = [
        f'"""BCNP message definitions for {source_name(schema)} (schema hash 0x{schema.hash:08X}).',
        "",
        f"Generated by {GENERATOR}; do not edit. Standalone: standard library only.",
        '"""',
        "",
        "# ruff: noqa",
        _PRELUDE.format(
            major=PROTOCOL_MAJOR,
            minor=PROTOCOL_MINOR,
            version=schema.version,
            hash=schema.hash,
            magic=HANDSHAKE_MAGIC,
            handshake_size=HANDSHAKE_SIZE,
            header_size=HEADER_SIZE,
            crc_size=CRC_SIZE,
            clear=CLEAR_QUEUE,
            max_messages=MAX_MESSAGES_PER_PACKET,
        ).rstrip("\n"),
        "",
        "",
        "class MessageTypeId(IntEnum):",
        "    Unknown = 0",
    ]
    out += [f"    {spec.name} = {spec.id}" for spec in specs]
    out += ["", ""]
    for spec in specs:
        out += _render_dataclass(spec)
    names = ", ".join(spec.name for spec in specs)
    message_union = f"Union[{names}]" if len(specs) > 1 else names
    out += [
        f"Message = {message_union}",
        "",
        "MESSAGE_REGISTRY: Dict[int, Type[Message]] = {",
    ]
    out += [f"    {spec.id}: {spec.name}," for spec in specs]
    out += ["}", "", "", _POSTLUDE.format().rstrip("\n"), ""]
    return "\n".join(out)


def schema_document(schema: Schema) -> dict[str, object]:
    """The schema as a plain document (what the loader reads), without editor keys."""
    doc: dict[str, object] = {"version": schema.version}
    if schema.namespace is not None:
        doc["namespace"] = schema.namespace
    if schema.description is not None:
        doc["description"] = schema.description
    messages = []
    for spec in schema.messages:
        msg: dict[str, object] = {"id": spec.id, "name": spec.name}
        if spec.description is not None:
            msg["description"] = spec.description
        fields = []
        for f in spec.fields:
            entry: dict[str, object] = {"name": f.name, "type": f.type}
            for key in ("scale", "unit", "description"):
                value = getattr(f, key)
                if value is not None:
                    entry[key] = value
            fields.append(entry)
        msg["fields"] = fields
        messages.append(msg)
    doc["messages"] = messages
    return doc


def render_typed_module(schema: Schema) -> str:
    """The project's ``messages.py`` (this robot's, beside robot.py): schema as data plus typed classes."""
    document = pprint.pformat(schema_document(schema), indent=4, width=100, sort_dicts=False)
    out = [
        f'"""Typed messages of {source_name(schema)} (schema hash 0x{schema.hash:08X}).',
        "",
        f"Generated by {GENERATOR}; do not edit. The schema is embedded as data and",
        "loaded by the runtime at import, so the robot needs no JSON file at run time;",
        "the classes below are the runtime's own message classes, typed for mypy.",
        '"""',
        "",
        "# ruff: noqa",
        "from __future__ import annotations",
        "",
        "from typing import TYPE_CHECKING, Any",
        "",
        "from bcnp.schema import Message, MessageSpec, Schema, load_schema",
        "",
        f"SCHEMA_HASH = 0x{schema.hash:08X}",
        "",
        f"SCHEMA_DOCUMENT: dict[str, Any] = {document}",
        "",
        "SCHEMA: Schema = load_schema(SCHEMA_DOCUMENT)",
        "if SCHEMA.hash != SCHEMA_HASH:  # the runtime's hash rules changed: regenerate",
        '    raise ImportError(f"schema hash 0x{SCHEMA.hash:08X}, generated for 0x{SCHEMA_HASH:08X}")',
        "",
    ]
    for spec in schema.messages:
        out.append(f'{_spec_constant(spec)}: MessageSpec = SCHEMA["{spec.name}"]')
    out += ["", "if TYPE_CHECKING:", ""]
    for spec in schema.messages:
        params = ", ".join(f"{f.name}: {_py_type(f)}" for f in spec.fields)
        out += [
            f"    class {spec.name}(Message):",
            f"        {_doc(spec.description, spec.name + ' message.')}",
            "",
            f"        def __init__(self, {params}) -> None: ...",
        ]
        for f in spec.fields:
            out += [
                "        @property",
                f"        def {f.name}(self) -> {_py_type(f)}: ...  # {_field_comment(f)}",
            ]
        out.append("")
    out.append("else:")
    for spec in schema.messages:
        out.append(f"    {spec.name} = {_spec_constant(spec)}.message_class")
    names = [_spec_constant(s) for s in schema.messages] + [s.name for s in schema.messages]
    out += ["", "__all__ = ["]
    out += [f'    "{n}",' for n in ["SCHEMA", "SCHEMA_DOCUMENT", "SCHEMA_HASH", *names]]
    out += ["]", ""]
    return "\n".join(out)


def _spec_constant(spec: MessageSpec) -> str:
    """ArmGoal -> ARM_GOAL_SPEC."""
    snake = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(spec.name))
    return f"{snake.upper()}_SPEC"
