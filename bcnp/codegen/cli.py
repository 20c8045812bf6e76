"""Command line of ``schema/bcnp_codegen.py``: info view, generation, drift check."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..schema import Schema, SchemaError, load_schema
from .info import render_info
from .json_schema import render_json_schema
from .python import render_python, render_typed_module

__all__ = ["PROJECT_ROOT", "main", "planned_outputs"]

#: The repository root (bcnp/codegen/cli.py -> ../../).
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent

#: The project's own generated files, relative to the root.
PROJECT_OUTPUTS: dict[str, Callable[[Schema], str]] = {
    "messages.py": render_typed_module,
    "schema/bcnp_schema.json": lambda _schema: render_json_schema(),
}

EPILOG = """\
examples:
  python schema/bcnp_codegen.py schema/messages.json
      print version, hash (0x%08X) and the message table
  python schema/bcnp_codegen.py schema/messages.json --cpp src/generated --python host
      write src/generated/bcnp/message_types.h and host/bcnp_messages.py
  python schema/bcnp_codegen.py schema/messages.json --project
      regenerate the project's own files: messages.py, schema/bcnp_schema.json
  python schema/bcnp_codegen.py schema/messages.json --check
      exit 1, naming each stale file, if a project file differs from what the schema gives

exit status: 0 success, 1 stale files (--check) or a file that cannot be
written, 2 an invalid schema, a missing file, bad JSON or bad arguments.
"""


def _render_cpp(schema: Schema) -> str:
    from .cpp import render_cpp  # the C++ generator is only loaded when asked for

    return render_cpp(schema)


def planned_outputs(
    schema: Schema, cpp: Path | None, python: Path | None, project: bool
) -> dict[Path, Callable[[Schema], str]]:
    """Every file the given options produce, mapped to its renderer."""
    out: dict[Path, Callable[[Schema], str]] = {}
    if cpp is not None:
        out[cpp / "bcnp" / "message_types.h"] = _render_cpp
    if python is not None:
        out[python / "bcnp_messages.py"] = render_python
    if project:
        for rel, render in PROJECT_OUTPUTS.items():
            out[PROJECT_ROOT / rel] = render
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bcnp_codegen.py",
        description="Validate a BCNP schema, show its hash and messages, and generate "
        "Python and C++ code from it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("schema", metavar="SCHEMA.json", help="the schema file, e.g. schema/messages.json")
    parser.add_argument(
        "--cpp",
        metavar="DIR",
        type=Path,
        help="write DIR/bcnp/message_types.h (C++17), e.g. --cpp src/generated",
    )
    parser.add_argument(
        "--python",
        metavar="DIR",
        type=Path,
        help="write DIR/bcnp_messages.py (standalone, stdlib only), e.g. --python host",
    )
    parser.add_argument(
        "--project",
        action="store_true",
        help="write the project's own generated files (messages.py, schema/bcnp_schema.json)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming every file that differs from what SCHEMA.json produces "
        "(the files of --cpp/--python/--project; with none of them, the project's own files)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        schema = load_schema(args.schema)
    except SchemaError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    project = args.project or (args.check and args.cpp is None and args.python is None)
    outputs = planned_outputs(schema, args.cpp, args.python, project)
    if not outputs:
        sys.stdout.write(render_info(schema))
        return 0
    try:
        texts = {path: render(schema) for path, render in outputs.items()}
    except ValueError as exc:  # a valid schema this output cannot express
        for line in str(exc).splitlines():
            print(f"error: {args.schema}: {line}", file=sys.stderr)
        return 2
    if args.check:
        return _check(texts, args.schema, schema.hash)
    for path, text in texts.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        except OSError as exc:
            print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {_show(path)}")
    return 0


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _check(texts: dict[Path, str], source: str, schema_hash: int) -> int:
    stale = []
    for path, text in texts.items():
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            stale.append(path)
    for path in stale:
        state = "missing" if not path.exists() else "stale"
        print(f"{state}: {_show(path)} differs from what {source} produces", file=sys.stderr)
    if stale:
        print(
            f"regenerate with: python schema/bcnp_codegen.py {source} [same options, without --check]",
            file=sys.stderr,
        )
        return 1
    print(f"up to date: {', '.join(_show(p) for p in texts)} (hash 0x{schema_hash:08X})")
    return 0
