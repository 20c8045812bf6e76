"""Field types and fields: the wire spec's type table and one field's value rules.

Implements the field type table of the BCNP 3.2 wire spec. A :class:`FieldSpec`
turns a user value into the integer that travels on the wire
(:meth:`FieldSpec.to_wire`: float32 fields scaled and rounded half away from
zero, every value range-checked) and back (:meth:`FieldSpec.from_wire`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_FLOAT_SCALE",
    "FIELD_TYPES",
    "INT32_MAX",
    "INT32_MIN",
    "FieldSpec",
    "FieldType",
]

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
