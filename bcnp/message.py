"""Message types and messages: the codec a schema's messages are built with.

Implements "Registration-Based Serialization" of the BCNP 3.2.2 overview: a
:class:`MessageSpec` (id, name, fields in wire order) builds a message class of
its own, and calling the spec builds a message.

A message built from a spec holds its *wire* form: float32 fields are scaled
and rounded half away from zero when the message is built, every value is
range-checked then, and the result is packed into the message's bytes on the
wire. Reading a field gives the value that travels on the wire (``raw / scale``
for float32), so ``decode(encode(m)) == m`` always holds and encoding a batch
is a join of bytes the messages already hold.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .fields import FieldSpec

__all__ = ["Message", "MessageSpec"]


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
