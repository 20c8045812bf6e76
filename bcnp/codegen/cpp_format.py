"""Text helpers of the C++ header generator: comments, alignment, wrapping and sections.

Text from the schema (its source name, descriptions, units) goes through
:func:`comment_text` before it goes into a comment; what may run past
:data:`LINE_WIDTH` is wrapped (:func:`comment_lines`) or split (:func:`if_any`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

__all__ = ["LINE_WIDTH", "aligned", "comment_lines", "comment_text", "if_any", "rule", "section"]

#: Width the generated lines keep to where the names allow (aligned field comments may run over).
LINE_WIDTH = 100

_LINE_SPLICE = re.compile(r"(\\|\?\?/)+$")


def comment_text(text: str) -> str:
    """``text`` as comment text that stays on its line, however it is wrapped.

    Whitespace runs (newlines included) become one space and control
    characters a space. A backslash (or ``??/``) ending a word is dropped: at
    the end of a line it would splice the next source line into the comment.
    """
    printable = "".join(ch if ch.isprintable() else " " for ch in text)
    words = (_LINE_SPLICE.sub("", word) for word in printable.split())
    return " ".join(word for word in words if word)


def aligned(rows: Iterable[tuple[str, str]], indent: str) -> list[str]:
    """Lines of ``code  // comment`` with the comments aligned."""
    rows = list(rows)
    width = max(len(code) for code, _ in rows)
    return [f"{indent}{code:<{width}}  // {comment}".rstrip() for code, comment in rows]


def comment_lines(text: str, prefix: str) -> list[str]:
    """``text`` wrapped to the header's line width, each line behind ``prefix`` (``// ``, ``/// ``)."""
    width = LINE_WIDTH - len(prefix)
    return [f"{prefix}{line}" for line in textwrap.wrap(text, width, break_long_words=False)]


def if_any(conditions: list[str], indent: str) -> list[str]:
    """``if (a || b) {`` on one line, or one condition per line when that is too long."""
    line = f"{indent}if ({' || '.join(conditions)}) {{"
    if len(line) <= LINE_WIDTH:
        return [line]
    head = f"{indent}if ("
    pad = " " * len(head)
    lines = [f"{head if i == 0 else pad}{cond} ||" for i, cond in enumerate(conditions)]
    lines[-1] = lines[-1].removesuffix(" ||") + ") {"
    return lines


def rule(title: str) -> str:
    """The comment line that opens a section of the header, ending in the section's title."""
    return f"// {'-' * 76} {title}"


def section(title: str, lines: Iterable[str]) -> str:
    """A section of the header: its :func:`rule`, a blank line, then ``lines``, one a line."""
    return "\n".join([rule(title), "", *lines])
