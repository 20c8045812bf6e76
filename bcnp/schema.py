"""Message schema: loading, validation, the schema hash and message classes.

Implements "Registration-Based Serialization" and "Schema Hash" of the BCNP
3.2.2 overview and the field type table of the 3.2 wire spec. The hash is the
IEEE CRC-32 of a canonical JSON text (messages by id; only id, name, fields;
fields only name, type and a scale when the source gives one; keys sorted, no
whitespace) so that it matches the reference generator bit for bit.

A message built from a spec holds its *wire* form: float32 fields are scaled
and rounded half away from zero when the message is built, every value is
range-checked then, and the result is packed into the message's bytes on the
wire. Reading a field gives the value that travels on the wire (``raw / scale``
for float32), so ``decode(encode(m)) == m`` always holds and encoding a batch
is a join of bytes the messages already hold.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard, Union

__all__ = [
    "DEFAULT_FLOAT_SCALE",
    "FIELD_TYPES",
    "FieldSpec",
    "FieldType",
    "Message",
    "MessageSpec",
    "Schema",
    "SchemaError",
    "SUPPORTED_SCHEMA_VERSION",
    "compute_schema_hash",
    "load_schema",
]

#: The only schema version this implementation speaks: its packets carry
#: major 3, minor 2 in the header, taken from this string.
SUPPORTED_SCHEMA_VERSION = "3.2"

#: Scale applied to a float32 field whose schema entry gives none.
DEFAULT_FLOAT_SCALE = 10000

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class FieldType:
    """One row of the wire spec's field type table."""

    name: str
    struct_code: str
    size: int
    raw_min: int
    raw_max: int

    @property
    def is_float(self) -> bool:
        return self.name == "float32"


FIELD_TYPES: dict[str, FieldType] = {
    t.name: t
    for t in (
        FieldType("int8", "b", 1, -(2**7), 2**7 - 1),
        FieldType("uint8", "B", 1, 0, 2**8 - 1),
        FieldType("int16", "h", 2, -(2**15), 2**15 - 1),
        FieldType("uint16", "H", 2, 0, 2**16 - 1),
        FieldType("int32", "i", 4, INT32_MIN, INT32_MAX),
        FieldType("uint32", "I", 4, 0, 2**32 - 1),
        # float32 travels as a big-endian int32 holding value * scale.
        FieldType("float32", "i", 4, INT32_MIN, INT32_MAX),
    )
}

_MESSAGE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_FIELD_NAME = re.compile(r"^[a-z][A-Za-z0-9]*$")
_VERSION_SHAPE = re.compile(r"^(\d+)\.(\d+)(\.\d+)?$")

# Field names must be usable as attributes in Python and as members in the
# generated C++; names the message classes already use are refused too.
_CPP_KEYWORDS = frozenset(
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
_PYTHON_KEYWORDS = frozenset(
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
        part in _CPP_KEYWORDS or part == "std" or "__" in part for part in namespace.split("::")
    )


#: Every field name refused as a reserved word (Python, C++ or BCNP).
RESERVED_FIELD_WORDS = _PYTHON_KEYWORDS | _CPP_KEYWORDS | RESERVED_FIELD_NAMES

_TOP_KEYS = frozenset({"$schema", "version", "namespace", "description", "messages"})
_MESSAGE_KEYS = frozenset({"id", "name", "description", "fields"})
_FIELD_KEYS = frozenset({"name", "type", "scale", "unit", "description"})


class SchemaError(ValueError):
    """A schema file or dict that cannot be used.

    ``problems`` holds one line per problem, each naming the file, message,
    field and the rule broken.
    """

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _round_half_away(value: float) -> int:
    """Round like C ``llround``: halves go away from zero."""
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:  # exact: whole and magnitude share a binade
        whole += 1
    return int(-whole if value < 0 else whole)


@dataclass(frozen=True)
class FieldSpec:
    """One field of a message, in wire order."""

    name: str
    type: str
    scale: int | None  # as written in the schema (None when absent)
    unit: str | None
    description: str | None
    offset: int  # byte offset inside the message
    _wire_rule: tuple[bool, int, int, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # What to_wire needs, looked up once: it runs for every field of every message built.
        ftype = FIELD_TYPES.get(self.type)
        is_float = self.type == "float32"
        scale = (self.scale if self.scale is not None else DEFAULT_FLOAT_SCALE) if is_float else 1
        limits = (ftype.raw_min, ftype.raw_max) if ftype is not None else (0, -1)
        object.__setattr__(self, "_wire_rule", (is_float, scale, *limits))

    @property
    def field_type(self) -> FieldType:
        return FIELD_TYPES[self.type]

    @property
    def size(self) -> int:
        return FIELD_TYPES[self.type].size

    @property
    def is_float(self) -> bool:
        return self.type == "float32"

    @property
    def effective_scale(self) -> int:
        """The scale used on the wire (the default applies to unscaled floats)."""
        if not self.is_float:
            return 1
        return self.scale if self.scale is not None else DEFAULT_FLOAT_SCALE

    def to_wire(self, value: Any, owner: str = "") -> int:
        """Convert a user value to the integer that travels on the wire.

        Raises ``ValueError`` (or ``TypeError`` for a non-number) naming the
        field, the value and the allowed range.
        """
        is_float, scale, raw_min, raw_max = self._wire_rule
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, bool):
                value = int(value)
            else:
                raise TypeError(f"{self._where(owner)}: expected a number, got {value!r}")
        if is_float:
            finite = math.isfinite(value)
            raw = _round_half_away(float(value) * scale) if finite else 0
            if not finite or not raw_min <= raw <= raw_max:
                lo = raw_min / scale
                hi = raw_max / scale
                problem = "is outside" if finite else "is not a finite number in"
                raise ValueError(
                    f"{self._where(owner)}: {value!r} {problem} the float32 wire range [{lo}, {hi}] "
                    f"(int32 at scale {scale})"
                )
            return raw
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"{self._where(owner)}: {value!r} is not an integer ({self.type})")
            value = int(value)
        if not raw_min <= value <= raw_max:
            raise ValueError(
                f"{self._where(owner)}: {value!r} is outside the {self.type} range [{raw_min}, {raw_max}]"
            )
        return int(value)

    def _where(self, owner: str) -> str:
        return f"{owner}.{self.name}" if owner else self.name

    def from_wire(self, raw: int) -> float | int:
        return raw / self.effective_scale if self.is_float else raw


class Message:
    """Base of every message class a :class:`MessageSpec` builds.

    Instances are immutable and hold their bytes on the wire
    (:meth:`to_bytes`; ``raw`` gives them as integers); each schema field is a
    read-only attribute (float32 fields read as ``raw / scale``). Two messages
    are equal when they are of the same type and carry the same wire values.
    (Methods whose names hold an underscore cannot clash with a field: field
    names have none.)
    """

    # Only the packed bytes: what encoding needs, and smaller than a tuple of
    # ints (a field read unpacks its few bytes, which costs well under a
    # microsecond and happens a few times per robot tick at most). Each message
    # class holds them in a slot of its own (see _make_message_class); ``_wire``
    # is that slot under the name every method uses.
    if TYPE_CHECKING:
        __slots__ = ("_wire",)
    else:
        __slots__ = ()
    _wire: bytes
    spec: ClassVar[MessageSpec]
    _pack: ClassVar[Callable[[Sequence[Any]], bytes | None]]
    _own_slot: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass of a message class inherits its slot; hiding the slot's own
        # name keeps its instances off pack_many's fast path, which takes only
        # messages of exactly the spec's class.
        own = getattr(cls, "_own_slot", None)
        if own is not None and "_own_slot" not in cls.__dict__:
            setattr(cls, own, None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        spec = type(self).spec
        fields = spec.fields
        if not kwargs and len(args) == len(fields):  # every value, in field order
            name = spec.name
            self._wire = spec.struct.pack(*[f.to_wire(v, name) for f, v in zip(fields, args, strict=True)])
            return
        if len(args) > len(fields):
            raise TypeError(f"{spec.name}() takes {len(fields)} values, got {len(args)}")
        values: dict[str, Any] = dict(zip((f.name for f in fields), args, strict=False))
        for key, value in kwargs.items():
            if key in values:
                raise TypeError(f"{spec.name}() got two values for {key!r}")
            values[key] = value
        unknown = set(values) - set(spec.field_names)
        if unknown:
            raise TypeError(f"{spec.name}() has no field(s) {', '.join(sorted(unknown))}")
        missing = [f.name for f in fields if f.name not in values]
        if missing:
            raise TypeError(f"{spec.name}() is missing field(s) {', '.join(missing)}")
        self._wire = spec.struct.pack(*(f.to_wire(values[f.name], spec.name) for f in fields))

    @property
    def raw(self) -> tuple[int, ...]:
        """The wire integers, in field order."""
        return type(self).spec.struct.unpack(self._wire)

    def to_bytes(self) -> bytes:
        """The message as it travels on the wire: ``spec.wire_size`` bytes, big-endian."""
        return self._wire

    @classmethod
    def pack_many(cls, messages: Sequence[Any]) -> bytes | None:
        """The wire bytes of ``messages`` back to back, or ``None`` unless every
        one of them is a message of exactly this class."""
        return cls._pack(messages)

    def as_dict(self) -> dict[str, float | int]:
        return {f.name: f.from_wire(r) for f, r in zip(type(self).spec.fields, self.raw, strict=True)}

    def replace(self, **changes: Any) -> Message:
        """A copy with some fields changed (validated like a new message)."""
        values = self.as_dict()
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._wire == other._wire

    def __hash__(self) -> int:
        return hash((type(self).spec.id, self._wire))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"{type(self).spec.name}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).spec.message_from_raw, (self.raw,))


_new_object = object.__new__
_class_numbers = itertools.count(1)

# Gathering a batch's bytes is the whole of encoding a batch of built messages,
# so it is one comprehension that reads one slot per message. The slot's name is
# the class's own: no other class has it, so reading it is the type test
# (anything else raises AttributeError, or gives what join refuses), at no
# cost per message. A comprehension cannot take an attribute name as a value,
# hence the text; the name comes from _make_message_class, never from a schema.
_PACK_TEMPLATE = """
def pack(messages):
    try:
        return b"".join([m.{slot} for m in messages])
    except (AttributeError, TypeError):
        return None
"""


def _make_message_class(spec: MessageSpec) -> type[Message]:
    slot = f"_wire_{next(_class_numbers)}"
    code: dict[str, Any] = {}
    exec(_PACK_TEMPLATE.format(slot=slot), code)
    namespace: dict[str, Any] = {
        "__slots__": (slot,),
        "spec": spec,
        "__doc__": spec.description,
        "_own_slot": slot,
        "_pack": staticmethod(code["pack"]),
    }
    for field in spec.fields:
        namespace[field.name] = _field_property(field)
    cls: Any = type(spec.name, (Message,), namespace)
    cls._wire = cls.__dict__[slot]  # the same storage under the common name
    return cls  # type: ignore[no-any-return]


def _field_property(field: FieldSpec) -> property:
    doc = f"{field.type}" + (f" [{field.unit}]" if field.unit else "")
    unpack = struct.Struct(">" + field.field_type.struct_code).unpack_from
    offset = field.offset
    if field.is_float:
        scale = field.effective_scale

        def get_float(self: Message) -> float:
            raw: int = unpack(self._wire, offset)[0]
            return raw / scale

        return property(get_float, doc=doc)

    def get_int(self: Message) -> int:
        raw: int = unpack(self._wire, offset)[0]
        return raw

    return property(get_int, doc=doc)


class MessageSpec:
    """A message type: id, name, fields in wire order, wire size.

    Calling a spec builds a message: ``spec(speed=1.0, durationMs=100)``.
    """

    def __init__(
        self,
        id: int,
        name: str,
        fields: Sequence[FieldSpec],
        description: str | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.fields: tuple[FieldSpec, ...] = tuple(fields)
        self.description = description
        self.field_names: tuple[str, ...] = tuple(f.name for f in self.fields)
        self.struct = struct.Struct(">" + "".join(f.field_type.struct_code for f in self.fields))
        self.wire_size: int = self.struct.size
        self.message_class: type[Message] = _make_message_class(self)
        cls = self.message_class
        pack = self.struct.pack
        set_wire = cls.__dict__[cls._own_slot].__set__  # the slot: sets without __init__

        def from_raw(raw: tuple[int, ...]) -> Message:
            msg = _new_object(cls)
            set_wire(msg, pack(*raw))
            return msg

        #: Build a message from wire integers (no range check beyond what packing
        #: them does: they came off the wire or from ``struct.unpack`` of this spec).
        self.message_from_raw = from_raw

    def __call__(self, *args: Any, **kwargs: Any) -> Message:
        return self.message_class(*args, **kwargs)

    def field(self, name: str) -> FieldSpec:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    def field_index(self, name: str) -> int:
        try:
            return self.field_names.index(name)
        except ValueError:
            raise KeyError(f"{self.name} has no field {name!r}") from None

    def to_raw(self, value: Any) -> tuple[int, ...]:
        """Wire integers for a message of this spec, a mapping or a sequence of values."""
        return self._message(value).raw

    def to_wire(self, value: Any) -> bytes:
        """Wire bytes for a message of this spec, a mapping or a sequence of values
        (validated as when building a message)."""
        return self._message(value).to_bytes()

    def _message(self, value: Any) -> Message:
        if type(value) is self.message_class:
            return value
        if isinstance(value, Message):
            raise TypeError(f"expected a {self.name} message, got {type(value).spec.name}")
        if isinstance(value, Mapping):
            return self.message_class(**value)
        return self.message_class(*value)

    def pack_messages(self, messages: Sequence[Any]) -> bytes:
        """The wire bytes of ``messages`` back to back: a packet's payload.

        Each item is a message of this spec, a mapping or a sequence of field
        values (validated as :meth:`to_wire` does). When all are messages of
        this spec, as a sender's batch is, this joins the bytes they hold.
        """
        payload = self.message_class.pack_many(messages)
        if payload is None:
            payload = b"".join(map(self.to_wire, messages))
        return payload

    def __repr__(self) -> str:
        return f"<MessageSpec {self.name} id={self.id} wire_size={self.wire_size}>"


class Schema:
    """A loaded, validated schema: its messages in id order and its hash."""

    def __init__(
        self,
        version: str,
        messages: Sequence[MessageSpec],
        hash: int,
        source: str | None = None,
        namespace: str | None = None,
        description: str | None = None,
    ) -> None:
        self.version = version
        self.messages: tuple[MessageSpec, ...] = tuple(sorted(messages, key=lambda m: m.id))
        self.hash = hash
        self.source = source
        self.namespace = namespace
        self.description = description
        self._by_id = {m.id: m for m in self.messages}
        self._by_name = {m.name: m for m in self.messages}

    @property
    def by_id(self) -> Mapping[int, MessageSpec]:
        return self._by_id

    def __getitem__(self, key: int | str) -> MessageSpec:
        try:
            if isinstance(key, str):
                return self._by_name[key]
            return self._by_id[key]
        except KeyError:
            raise KeyError(f"schema has no message {key!r}") from None

    def get(self, key: int | str) -> MessageSpec | None:
        return self._by_name.get(key) if isinstance(key, str) else self._by_id.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_name or key in self._by_id

    def __iter__(self) -> Iterator[MessageSpec]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def max_wire_size(self) -> int:
        return max(m.wire_size for m in self.messages)

    def __repr__(self) -> str:
        names = ", ".join(m.name for m in self.messages)
        return f"<Schema v{self.version} hash=0x{self.hash:08X} [{names}]>"


def compute_schema_hash(doc: Mapping[str, Any]) -> int:
    """CRC-32 of the canonical JSON text of a (valid) schema document."""
    messages = []
    for m in sorted(doc["messages"], key=lambda m: m["id"]):
        fields = []
        for f in m["fields"]:
            entry = {"name": f["name"], "type": f["type"]}
            if "scale" in f:
                entry["scale"] = f["scale"]
            fields.append(entry)
        messages.append({"id": m["id"], "name": m["name"], "fields": fields})
    canonical = json.dumps(
        {"messages": messages, "version": doc["version"]},
        sort_keys=True,
        separators=(",", ":"),
    )
    return zlib.crc32(canonical.encode("utf-8")) & 0xFFFFFFFF


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


def validate_schema_document(doc: Any, source: str = "<schema>") -> list[str]:
    """Every problem of a parsed schema document, one line each (empty: valid)."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return [f"{source}: top level must be a JSON object, got {type(doc).__name__}"]
    _check_keys(doc, _TOP_KEYS, source, problems)
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
    label = f"message {name!r}" if isinstance(name, str) else f"messages[{index}]"
    where = f"{source}: {label}"
    _check_keys(msg, _MESSAGE_KEYS, where, out)
    if not isinstance(name, str):
        out.append(f"{where}: 'name' is required and must be a string")
    else:
        if not _MESSAGE_NAME.match(name):
            out.append(f"{where}: name must be PascalCase (^[A-Z][A-Za-z0-9]*$)")
        elif name in RESERVED_MESSAGE_NAMES:
            out.append(f"{where}: name {name!r} is a reserved word")
        if name in names:
            out.append(f"{where}: duplicate message name {name!r}")
        names.add(name)
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
    name = field.get("name")
    fwhere = f"{where}: field {name!r}" if isinstance(name, str) else f"{where}: fields[{index}]"
    _check_keys(field, _FIELD_KEYS, fwhere, out)
    if not isinstance(name, str):
        out.append(f"{fwhere}: 'name' is required and must be a string")
    else:
        if not _FIELD_NAME.match(name):
            out.append(f"{fwhere}: name must be camelCase (^[a-z][A-Za-z0-9]*$)")
        elif name in RESERVED_FIELD_WORDS:
            out.append(f"{fwhere}: name {name!r} is a reserved word in Python, C++ or BCNP")
        if name in seen:
            out.append(f"{fwhere}: duplicate field name {name!r}")
        seen.add(name)
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


def _read_document(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SchemaError([f"{path}: cannot read schema: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise SchemaError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError([f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"]) from None


SchemaSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]


def load_schema(source: SchemaSource) -> Schema:
    """Load and validate a schema from a JSON file path or an already-parsed dict.

    Raises :class:`SchemaError` listing every problem found.
    """
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        doc: Any = _read_document(name)
    else:
        doc = source  # an already-parsed document (validated like a file's)
        name = "<schema>"
    problems = validate_schema_document(doc, name)
    if problems:
        raise SchemaError(problems)
    specs = []
    for m in doc["messages"]:
        offset = 0
        fields = []
        for f in m["fields"]:
            fields.append(
                FieldSpec(
                    name=f["name"],
                    type=f["type"],
                    scale=f.get("scale"),
                    unit=f.get("unit"),
                    description=f.get("description"),
                    offset=offset,
                )
            )
            offset += FIELD_TYPES[f["type"]].size
        specs.append(MessageSpec(m["id"], m["name"], fields, m.get("description")))
    return Schema(
        version=doc["version"],
        messages=specs,
        hash=compute_schema_hash(doc),
        source=name if isinstance(source, (str, os.PathLike)) else None,
        namespace=doc.get("namespace"),
        description=doc.get("description"),
    )
