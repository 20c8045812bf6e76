"""Message schema: loading a schema, its hash and the :class:`Schema` of its messages.

Implements "Schema Hash" of the BCNP 3.2.2 overview. The hash is the IEEE
CRC-32 of a canonical JSON text (messages by id; only id, name, fields; fields
only name, type and a scale when the source gives one; keys sorted, no
whitespace) so that it matches the reference generator bit for bit.

:func:`load_schema` reads and validates a document (the rules are
:mod:`bcnp.schema_rules`), lays each message's fields out in wire order and
builds a :class:`~bcnp.message.MessageSpec` per message (:mod:`bcnp.message`,
with the field types of :mod:`bcnp.fields`). The names of those modules that
callers use are importable from here too.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Union

# Every public name of the schema's modules is importable from here (``name as name`` exports
# one that __all__ leaves out).
from .fields import DEFAULT_FLOAT_SCALE, FIELD_TYPES, FieldSpec, FieldType
from .fields import INT32_MAX as INT32_MAX
from .fields import INT32_MIN as INT32_MIN
from .message import Message, MessageSpec
from .schema_rules import NAMESPACE_PATTERN as NAMESPACE_PATTERN
from .schema_rules import RESERVED_FIELD_NAMES as RESERVED_FIELD_NAMES
from .schema_rules import RESERVED_FIELD_WORDS as RESERVED_FIELD_WORDS
from .schema_rules import RESERVED_MESSAGE_NAMES as RESERVED_MESSAGE_NAMES
from .schema_rules import SUPPORTED_SCHEMA_VERSION
from .schema_rules import is_cpp_namespace as is_cpp_namespace
from .schema_rules import validate_schema_document as validate_schema_document
from .schema_rules import version_is_supported as version_is_supported

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


class SchemaError(ValueError):
    """A schema file or dict that cannot be used.

    ``problems`` holds one line per problem, each naming the file, message,
    field and the rule broken.
    """

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


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
