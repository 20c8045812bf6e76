"""What a schema document may hold: its version, names, reserved words and keys.

:func:`validate_schema_document` checks a parsed ``messages.json`` against
these rules and lists every problem, one line each naming the file, message,
field and the rule broken. The names are kept usable everywhere a schema goes:
as attributes in Python and as members and types in the generated C++. The
JSON Schema of such files (:mod:`bcnp.codegen.json_schema`) is built from the
same constants.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from .fields import FIELD_TYPES, INT32_MAX

__all__ = [
    "CPP_KEYWORDS",
    "FIELD_KEYS",
    "FIELD_NAME_PATTERN",
    "MESSAGE_KEYS",
    "MESSAGE_NAME_PATTERN",
    "NAMESPACE_PATTERN",
    "PYTHON_KEYWORDS",
    "RESERVED_FIELD_NAMES",
    "RESERVED_FIELD_WORDS",
    "RESERVED_MESSAGE_NAMES",
    "SUPPORTED_SCHEMA_VERSION",
    "TOP_KEYS",
    "is_cpp_namespace",
    "validate_schema_document",
    "version_is_supported",
]

#: The only schema version this implementation speaks: its packets carry
#: major 3, minor 2 in the header, taken from this string.
SUPPORTED_SCHEMA_VERSION = "3.2"

MESSAGE_NAME_PATTERN = re.compile(r"^[A-Z][A-Za-z0-9]*$")
FIELD_NAME_PATTERN = re.compile(r"^[a-z][A-Za-z0-9]*$")
_VERSION_SHAPE = re.compile(r"^(\d+)\.(\d+)(\.\d+)?$")

# Field names must be usable as attributes in Python and as members in the
# generated C++; names the message classes already use are refused too.
CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch
    char char8_t char16_t char32_t class compl concept const consteval constexpr
    constinit const_cast continue co_await co_return co_yield decltype default
    delete do double dynamic_cast else enum explicit export extern false float
    for friend goto if inline int long mutable namespace new noexcept not not_eq
    nullptr operator or or_eq private protected public register reinterpret_cast
    requires return short signed sizeof static static_assert static_cast struct
    switch template this thread_local throw true try typedef typeid typename
    union unsigned using virtual void volatile wchar_t while xor xor_eq""".split()
)
# Python's hard keywords (soft keywords such as "match" or "type" are valid names).
PYTHON_KEYWORDS = frozenset(
    """False None True and as assert async await break class continue def del elif
    else except finally for from global if import in is lambda nonlocal not or pass
    raise return try while with yield""".split()
)
#: Field names the message classes (runtime, generated Python and C++) already use.
RESERVED_FIELD_NAMES = frozenset({"spec", "raw", "replace", "encode", "decode", "kTypeId", "kWireSize"})
#: Message names that would collide with names of the runtime or the generated code.
RESERVED_MESSAGE_NAMES = frozenset(
    {"False", "None", "True", "Any", "ClassVar", "Dict", "IntEnum", "Iterable", "List", "Message"}
    | {"MessageInfo", "MessageSpec", "MessageTypeId", "Optional", "Schema", "Tuple", "Type", "Union"}
    | {"Unknown"}
    # declared by the generated C++ header (and k<Name>Size clashes: Handshake, Crc, MinPacket)
    | {"Crc", "Crc32", "DecodePacket", "DecodedPacket", "EncodeHandshake", "EncodePacket"}
    | {"Handshake", "LookupMessage", "MinPacket", "PacketHeader", "PacketSize", "PacketStatus"}
    | {"PacketStatusName", "ParseHandshake", "ValidateHandshake", "ValidatePacket"}
)
#: A C++ namespace path for the generated header ("bcnp", "team254::bcnp").
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(::[A-Za-z][A-Za-z0-9_]*)*$")


def is_cpp_namespace(namespace: str) -> bool:
    """A usable C++ namespace path for the generated header: ``::``-separated
    identifiers, none a keyword, ``std`` or reserved (containing ``__``)."""
    return bool(NAMESPACE_PATTERN.match(namespace)) and not any(
        part in CPP_KEYWORDS or part == "std" or "__" in part for part in namespace.split("::")
    )


#: Every field name refused as a reserved word (Python, C++ or BCNP).
RESERVED_FIELD_WORDS = PYTHON_KEYWORDS | CPP_KEYWORDS | RESERVED_FIELD_NAMES

TOP_KEYS = frozenset({"$schema", "version", "namespace", "description", "messages"})
MESSAGE_KEYS = frozenset({"id", "name", "description", "fields"})
FIELD_KEYS = frozenset({"name", "type", "scale", "unit", "description"})


def version_is_supported(version: str) -> bool:
    """A schema version whose packets carry major 3, minor 2 ("3.2" or "3.2.x")."""
    match = _VERSION_SHAPE.match(version)
    return match is not None and f"{match[1]}.{match[2]}" == SUPPORTED_SCHEMA_VERSION


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], where: str, out: list[str]) -> None:
    for key in obj:
        if key not in allowed:
            out.append(f"{where}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")


@dataclass(frozen=True)
class _Entry:
    """The rules a message or field object shares: the keys it may hold and how it is named."""

    kind: str  # "message" or "field"; the document lists them under kind + "s"
    keys: frozenset[str]
    case: str  # the name's case, as problems call it
    pattern: re.Pattern[str]
    reserved: frozenset[str]
    reserved_by: str  # what reserves those words, as problems say it ("" or " in ...")

    def label(self, name: Any, index: int) -> str:
        """The entry as problems name it: by its name, or by its place when it has none."""
        return f"{self.kind} {name!r}" if isinstance(name, str) else f"{self.kind}s[{index}]"

    def check(self, obj: Mapping[str, Any], where: str, seen: set[str], out: list[str]) -> None:
        """Append the problems of the object's keys and name; note the name in ``seen``."""
        _check_keys(obj, self.keys, where, out)
        name = obj.get("name")
        if not isinstance(name, str):
            out.append(f"{where}: 'name' is required and must be a string")
            return
        if not self.pattern.match(name):
            out.append(f"{where}: name must be {self.case} ({self.pattern.pattern})")
        elif name in self.reserved:
            out.append(f"{where}: name {name!r} is a reserved word{self.reserved_by}")
        if name in seen:
            out.append(f"{where}: duplicate {self.kind} name {name!r}")
        seen.add(name)


_MESSAGE = _Entry("message", MESSAGE_KEYS, "PascalCase", MESSAGE_NAME_PATTERN, RESERVED_MESSAGE_NAMES, "")
_FIELD = _Entry(
    "field", FIELD_KEYS, "camelCase", FIELD_NAME_PATTERN, RESERVED_FIELD_WORDS, " in Python, C++ or BCNP"
)


def validate_schema_document(doc: Any, source: str = "<schema>") -> list[str]:
    """Every problem of a parsed schema document, one line each (empty: valid)."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return [f"{source}: top level must be a JSON object, got {type(doc).__name__}"]
    _check_keys(doc, TOP_KEYS, source, problems)
    version = doc.get("version")
    if version is None:
        problems.append(f"{source}: 'version' is required (\"{SUPPORTED_SCHEMA_VERSION}\")")
    elif not isinstance(version, str) or not _VERSION_SHAPE.match(version):
        problems.append(f'{source}: version must be a string like "3.2", got {version!r}')
    elif not version_is_supported(version):
        problems.append(
            f"{source}: version {version!r} is not supported: this implementation "
            f'speaks BCNP {SUPPORTED_SCHEMA_VERSION} (header major 3, minor 2: "3.2" or "3.2.x")'
        )
    for key in ("namespace", "description", "$schema"):
        if key in doc and not isinstance(doc[key], str):
            problems.append(f"{source}: {key!r} must be a string")
    namespace = doc.get("namespace")
    if isinstance(namespace, str) and not is_cpp_namespace(namespace):
        problems.append(
            f'{source}: namespace {namespace!r} must be a C++ namespace path such as "bcnp" or '
            "\"team254::bcnp\" (identifiers, no keywords, no 'std', no '__')"
        )
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append(f"{source}: 'messages' must be a non-empty list of message objects")
        return problems
    ids: dict[int, str] = {}
    names: set[str] = set()
    for index, msg in enumerate(messages):
        problems.extend(_validate_message(msg, index, source, ids, names))
    return problems


def _validate_message(msg: Any, index: int, source: str, ids: dict[int, str], names: set[str]) -> list[str]:
    out: list[str] = []
    if not isinstance(msg, dict):
        return [f"{source}: messages[{index}]: must be an object"]
    name = msg.get("name")
    where = f"{source}: {_MESSAGE.label(name, index)}"
    _MESSAGE.check(msg, where, names, out)
    mid = msg.get("id")
    if not _is_int(mid):
        out.append(f"{where}: 'id' is required and must be an integer 1..65535, got {mid!r}")
    elif not 1 <= mid <= 65535:
        out.append(f"{where}: id {mid} is out of range 1..65535")
    elif mid in ids:
        out.append(f"{where}: duplicate id {mid} (also used by {ids[mid]!r})")
    else:
        ids[mid] = name if isinstance(name, str) else f"messages[{index}]"
    if "description" in msg and not isinstance(msg["description"], str):
        out.append(f"{where}: 'description' must be a string")
    fields = msg.get("fields")
    if not isinstance(fields, list) or not fields:
        out.append(f"{where}: 'fields' must be a non-empty list of field objects")
        return out
    field_names: set[str] = set()
    for findex, field in enumerate(fields):
        out.extend(_validate_field(field, findex, where, field_names))
    return out


def _validate_field(field: Any, index: int, where: str, seen: set[str]) -> list[str]:
    out: list[str] = []
    if not isinstance(field, dict):
        return [f"{where}: fields[{index}]: must be an object"]
    fwhere = f"{where}: {_FIELD.label(field.get('name'), index)}"
    _FIELD.check(field, fwhere, seen, out)
    ftype = field.get("type")
    if not isinstance(ftype, str) or ftype not in FIELD_TYPES:
        out.append(f"{fwhere}: unknown type {ftype!r} (one of: {', '.join(FIELD_TYPES)})")
    if "scale" in field:
        scale = field["scale"]
        if ftype != "float32":
            if ftype in FIELD_TYPES:  # an unknown type is reported once, above
                out.append(f"{fwhere}: 'scale' is only allowed on float32 fields, not {ftype!r}")
        elif not _is_int(scale) or scale <= 0:
            out.append(f"{fwhere}: scale must be a positive integer, got {scale!r}")
        elif scale > INT32_MAX:
            out.append(f"{fwhere}: scale {scale} exceeds the int32 range")
    for key in ("unit", "description"):
        if key in field and not isinstance(field[key], str):
            out.append(f"{fwhere}: {key!r} must be a string")
    return out
