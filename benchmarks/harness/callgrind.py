"""Callgrind's client requests from Python, for the benchmarks that count instructions under
``valgrind --tool=callgrind`` (tick_instructions, codec_instructions): turn collection on and
off around what is measured, start instrumentation, dump the counts so far under a name.

The request is valgrind.h's magic instruction sequence, put in an executable page and called
through ``ctypes``: no compiler, no extension. Natively it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
from collections.abc import Callable
from typing import Any

#: The x86-64 client request of valgrind.h as a function ``long req(long *args, long default)``:
#: args in %rax, the default in %rdx, the special preamble (four rotations of %rdi that add up
#: to none), then ``xchg %rbx,%rbx``; Valgrind puts the answer in %rdx. Natively it does nothing
#: and returns the default.
_X86_64_REQUEST = bytes.fromhex(
    "4889f8"  # mov %rdi,%rax
    "4889f2"  # mov %rsi,%rdx
    "48c1c703"  # rol $3,%rdi
    "48c1c70d"  # rol $13,%rdi
    "48c1c73d"  # rol $61,%rdi
    "48c1c733"  # rol $51,%rdi
    "4887db"  # xchg %rbx,%rbx
    "4889d0"  # mov %rdx,%rax
    "c3"  # ret
)
_CALLGRIND_BASE = (ord("C") << 24) | (ord("T") << 16)  # VG_USERREQ_TOOL_BASE('C','T')
_DUMP_STATS_AT = _CALLGRIND_BASE + 3
_TOGGLE_COLLECT = _CALLGRIND_BASE + 2
_START_INSTRUMENTATION = _CALLGRIND_BASE + 4


class Callgrind:
    """Callgrind's client requests from Python (x86-64 Linux); no-ops when not under Valgrind."""

    def __init__(self) -> None:
        if platform.machine() not in ("x86_64", "AMD64"):
            raise SystemExit(f"client requests are written for x86-64, not {platform.machine()}")
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(_X86_64_REQUEST)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        # PYFUNCTYPE: the call keeps the interpreter lock (a CFUNCTYPE call lets it go and takes it
        # back, a point where another thread could take it inside a measured bracket).
        self._request = ctypes.PYFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong)(address)
        self._keep: list[Any] = []
        self.toggle = self._bound(_TOGGLE_COLLECT)

    def _args(self, request: int, *args: int) -> int:
        block = (ctypes.c_ulong * 6)(request, *args)
        self._keep.append(block)
        return ctypes.addressof(block)

    def _bound(self, request: int, *args: int) -> Callable[[], int]:
        # One C-level call each time: the bracket's own cost stays small and constant.
        return functools.partial(self._request, self._args(request, *args), 0)

    def start_instrumentation(self) -> None:
        self._bound(_START_INSTRUMENTATION)()

    def dump(self, name: str) -> None:
        text = ctypes.create_string_buffer(name.encode())
        self._keep.append(text)
        self._bound(_DUMP_STATS_AT, ctypes.addressof(text))()
