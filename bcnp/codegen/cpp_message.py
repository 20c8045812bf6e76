"""One message's struct in the C++ header: its members, ``Encode`` and ``Decode``.

Each schema field becomes a member of its C++ type (``float`` for float32),
commented with its wire type, scale, unit and description. ``Encode`` writes
the big-endian wire bytes at the field offsets of the loaded schema, refusing
float32 values that do not scale into int32; ``Decode`` reads them back.
"""

from __future__ import annotations

from ..fields import FieldSpec
from ..message import MessageSpec
from .cpp_format import LINE_WIDTH, aligned, comment_lines, comment_text, if_any

__all__ = ["message_struct"]


def _cpp_type(field: FieldSpec) -> str:
    ftype = field.field_type
    if ftype.is_float:
        return "float"
    return f"std::{'' if ftype.raw_min < 0 else 'u'}int{ftype.size * 8}_t"


def _wire_suffix(field: FieldSpec) -> str:
    """Suffix of the detail::Put/Get helper for the field's wire integer: U8, I32, ..."""
    ftype = field.field_type
    return f"{'I' if ftype.raw_min < 0 else 'U'}{ftype.size * 8}"


def _field_comment(field: FieldSpec) -> str:
    parts = [field.type]
    if field.is_float:
        default = "" if field.scale is not None else " (default)"
        parts.append(f"scale {field.effective_scale}{default}")
    if field.unit:
        parts.append(comment_text(field.unit))
    text = ", ".join(parts)
    if field.description:
        text += f": {comment_text(field.description)}"
    return text


def message_struct(spec: MessageSpec) -> str:
    """The struct of one message: its doc comment, ids, members, ``Encode`` and ``Decode``."""
    summary = f"{spec.name}: type id {spec.id}, {spec.wire_size} bytes on the wire."
    if spec.description:
        summary = f"{comment_text(spec.description)} ({summary[:-1]})."
    members = (
        (f"{_cpp_type(f)} {f.name} = {'0.0F' if f.is_float else '0'};", _field_comment(f))
        for f in spec.fields
    )
    lines = [
        *comment_lines(summary, "/// "),
        f"struct {spec.name} {{",
        f"  static constexpr MessageTypeId kTypeId = MessageTypeId::{spec.name};",
        f"  static constexpr std::size_t kWireSize = {spec.wire_size};",
        "",
        *aligned(members, "  "),
        "",
        *_encode(spec),
        "",
        *_decode(spec),
        "};",
        "",
    ]
    return "\n".join(lines)


def _encode(spec: MessageSpec) -> list[str]:
    """``Encode``: every float32 field scaled first, so that a refused one leaves nothing written."""
    floats = [f for f in spec.fields if f.is_float]
    values = {f.name: f"*{f.name}_wire" if f.is_float else f.name for f in spec.fields}
    return [
        "  /// Writes the kWireSize bytes of this message to out_buf. False, with nothing written, when",
        "  /// buf_size < kWireSize or a float32 field is NaN, infinite or out of the int32 range scaled.",
        "  bool Encode(std::uint8_t* out_buf, std::size_t buf_size) const {",
        *(
            f"    const auto {f.name}_wire = detail::ScaleToWire({f.name}, {f.effective_scale});"
            for f in floats
        ),
        *if_any(["buf_size < kWireSize", *(f"!{f.name}_wire" for f in floats)], "    "),
        "      return false;",
        "    }",
        *(f"    detail::Put{_wire_suffix(f)}(out_buf + {f.offset}, {values[f.name]});" for f in spec.fields),
        "    return true;",
        "  }",
    ]


def _decode(spec: MessageSpec) -> list[str]:
    """``Decode``: the signature on two lines when a long message name needs it."""
    head = f"  static std::optional<{spec.name}> Decode("
    params = "const std::uint8_t* in_buf, std::size_t buf_size) {"
    if len(head) + len(params) <= LINE_WIDTH:
        signature = [head + params]
    else:
        pad = " " * len(head)
        signature = [f"{head}const std::uint8_t* in_buf,", f"{pad}std::size_t buf_size) {{"]
    reads = []
    for f in spec.fields:
        read = f"detail::Get{_wire_suffix(f)}(in_buf + {f.offset})"
        if f.is_float:
            read = f"detail::ScaleFromWire({read}, {f.effective_scale})"
        reads.append((f"{read},", f.name))
    return [
        "  /// Reads a message from the first kWireSize bytes of in_buf; nullopt when buf_size < kWireSize.",
        *signature,
        "    if (buf_size < kWireSize) {",
        "      return std::nullopt;",
        "    }",
        f"    return {spec.name}{{",
        *aligned(reads, "        "),
        "    };",
        "  }",
    ]
