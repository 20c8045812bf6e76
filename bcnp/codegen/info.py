"""The schema info view: version, hash and a table of messages and fields."""

from __future__ import annotations

from ..schema import Schema

__all__ = ["render_info"]


def render_info(schema: Schema) -> str:
    """Human-readable summary of a schema (what ``bcnp_codegen.py SCHEMA`` prints)."""
    lines = []
    if schema.source:
        lines.append(f"Schema:   {schema.source}")
    lines += [
        f"Version:  {schema.version}",
        f"Hash:     0x{schema.hash:08X}",
        f"Messages: {len(schema)}",
        "",
    ]
    rows = [("ID", "MESSAGE", "WIRE", "FIELD", "TYPE", "SCALE", "UNIT")]
    for spec in schema.messages:
        for i, field in enumerate(spec.fields):
            scale = str(field.effective_scale) if field.is_float else "-"
            if field.is_float and field.scale is None:
                scale += " (default)"
            first = i == 0
            rows.append(
                (
                    str(spec.id) if first else "",
                    spec.name if first else "",
                    f"{spec.wire_size} B" if first else "",
                    field.name,
                    field.type,
                    scale,
                    field.unit or "-",
                )
            )
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"
