"""Stream parser: frames packets out of a byte stream and resynchronises.

Implements the spec's ``StreamParser`` ("Transport Guidelines", "Parser
Diagnostics") with the reference's resync rules:

* wrong major/minor: ``UNSUPPORTED_VERSION``, skip to the next ``03 02`` pair;
* unknown type id: ``UNKNOWN_MESSAGE_TYPE``, skip one byte;
* count above ``max_messages`` or a frame larger than ``max_buffer``:
  ``TOO_MANY_MESSAGES``, skip one byte;
* CRC mismatch: ``CHECKSUM_MISMATCH``, skip one byte and rescan;
* an incomplete frame waits for more bytes (no error).

Where the reference falls short this parser does better:

* every complete packet in a push is delivered (no per-push budget);
* bytes are buffered once and a waiting frame is never re-copied or re-parsed
  per chunk, so a 655 KB packet in 4 KB chunks costs about one push;
* while a frame waits for its bytes, the bytes behind its header are searched
  for complete packets whose CRC checks out. The first one found proves the
  waiting header was garbage: it is reported as ``TRUNCATED`` and parsing
  resumes at the valid packet. A corrupted header claiming 65,535 messages
  therefore cannot hold back the valid packets that follow it. (A payload that
  deliberately embeds a whole CRC-valid packet would be cut the same way; no
  real sender produces one.)
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections import Counter
from collections.abc import Callable

from .schema import Schema
from .wire import (
    CRC_SIZE,
    HEADER_SIZE,
    MAX_MESSAGES_PER_PACKET,
    MIN_PACKET_SIZE,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    ErrorInfo,
    PacketError,
    PacketView,
    check_header,
)

__all__ = ["StreamParser"]

_u32_unpack = struct.Struct(">I").unpack_from
_crc32 = zlib.crc32
_VERSION_PAIR = bytes((PROTOCOL_MAJOR, PROTOCOL_MINOR))

#: How many not-yet-complete candidate headers behind a waiting frame are
#: tracked at once; the search stops at the next one until one of them, or the
#: waiting frame, resolves.
MAX_CANDIDATES = 64

#: A search budget for a caller that must yield often (a receive thread
#: sharing the interpreter with the robot loop): push at most this many bytes
#: at a time, give the parser ``search_budget=SEARCH_STEP``, and between steps
#: yield, then call :meth:`StreamParser.resume` while
#: :attr:`StreamParser.search_pending`. Each call then searches at most this
#: many bytes behind a waiting header (about 30 us for 16 KiB of small command
#: messages, whose bytes hold many 0x03), however much is buffered: also when a
#: waiting frame completes with a bad CRC and the bytes behind its header are
#: parsed again, and when a candidate resolves after :data:`MAX_CANDIDATES`
#: were pending.
SEARCH_STEP = 16 * 1024

#: A packet whose frame is under 1/8 of the buffer it was parsed from gets its
#: own copy of its bytes; a larger one is a view into that buffer. A queue of
#: views therefore never pins buffers more than 8 times the data it holds,
#: while a packet that is most of its buffer (the common case) is never copied.
OWN_COPY_RATIO = 8

Buffer = bytes | bytearray


class _Candidate(enum.Enum):
    """What a candidate header behind a waiting frame turned out to be."""

    VALID = enum.auto()  # a complete packet whose CRC checks out
    DEAD = enum.auto()  # not a packet: bad header or bad CRC
    INCOMPLETE = enum.auto()  # its frame's bytes have not all arrived


class StreamParser:
    """Frames BCNP packets out of arbitrarily chunked bytes.

    ``on_packet(view)`` is called for every packet whose CRC checks out, in
    stream order; ``on_error(ErrorInfo)`` for every resync. An exception
    raised by a callback is counted in ``callback_errors`` (the last one kept
    in ``last_callback_error``) and never escapes :meth:`push`.

    ``max_buffer`` bounds the bytes held while a frame is incomplete; by
    default it is the largest legal packet of the schema, so every packet the
    schema allows can be received.

    The parser never waits and never yields. With ``search_budget`` (bytes), a
    call searches at most that many bytes behind a waiting header and leaves
    the rest for :meth:`resume` (:attr:`search_pending` says there is some):
    the caller yields in between, and packets come out in the same order as
    without a budget. A push of new bytes first goes on with such a search.
    """

    def __init__(
        self,
        schema: Schema,
        on_packet: Callable[[PacketView], object],
        on_error: Callable[[ErrorInfo], object] | None = None,
        max_buffer: int | None = None,
        max_messages: int = MAX_MESSAGES_PER_PACKET,
        search_budget: int | None = None,
    ) -> None:
        if not 0 <= max_messages <= MAX_MESSAGES_PER_PACKET:
            raise ValueError(f"max_messages must be 0..{MAX_MESSAGES_PER_PACKET}")
        largest = MIN_PACKET_SIZE + max_messages * schema.max_wire_size
        if max_buffer is None:
            max_buffer = largest
        if max_buffer < MIN_PACKET_SIZE:
            raise ValueError(f"max_buffer must be at least {MIN_PACKET_SIZE} bytes")
        if search_budget is not None and search_budget < 1:
            raise ValueError("search_budget must be at least 1 byte, or None for no budget")
        self.schema = schema
        self.on_packet = on_packet
        self.on_error = on_error
        self.max_buffer = max_buffer
        self.max_messages = max_messages
        self.search_budget = search_budget
        #: A search was cut short by ``search_budget``: call :meth:`resume`.
        self.search_pending = False
        self._specs = schema.by_id
        # Counters (read from any thread; written only by the pushing thread).
        self.bytes_received = 0
        #: Bytes that were in no packet: skipped while resynchronising, or
        #: buffered when :meth:`reset` dropped them. Always
        #: ``bytes_received == bytes of delivered packets + bytes_dropped + buffered``.
        self.bytes_dropped = 0
        #: Bytes behind waiting headers searched for a complete packet (the cost
        #: of look-behind; a byte searched again counts again).
        self.bytes_searched = 0
        self._call_from = 0  # bytes_searched when the current push or resume began
        self._buf = bytearray()
        self.packets = 0
        self.errors = 0
        self.error_counts: Counter[PacketError] = Counter()
        self.last_error: ErrorInfo | None = None
        self.callback_errors = 0
        self.last_callback_error: BaseException | None = None
        self.reset()

    def reset(self) -> None:
        """Forget buffered bytes and error streaks (a new connection starts)."""
        self.bytes_dropped += len(self._buf)
        self._buf = bytearray()
        self._base = 0  # stream offset of _buf[0]
        self._need = 0  # > 0: _buf starts with a header whose frame needs this many bytes
        self._scan = 0  # first _buf index not yet searched for candidates
        self._pending: list[int] = []  # candidate headers whose frame is incomplete
        self._consecutive = 0
        self.search_pending = False

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    @property
    def consecutive_errors(self) -> int:
        return self._consecutive

    def push(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes; delivers every packet they complete, in order (with a
        ``search_budget``, possibly some only in :meth:`resume`)."""
        size = len(data)
        if not size:
            return
        if self.search_pending:  # the owner did not resume: finish that search first, in order
            budget, self.search_budget = self.search_budget, None
            try:
                self._search_waiting(self._buf)
            finally:
                self.search_budget = budget
        self._call_from = self.bytes_searched
        self.bytes_received += size
        buf = self._buf
        if buf:
            if len(buf) + size < self._need:
                buf += data
                self._search_waiting(buf)
                return
            work = b"".join((buf, data))  # one copy of both, not an append and then a copy
        else:
            work = data if type(data) is bytes else bytes(data)
        self._parse(work, 0)

    def resume(self) -> None:
        """Go on with a search ``search_budget`` cut short (see :attr:`search_pending`)."""
        if self.search_pending:
            self._call_from = self.bytes_searched
            self._search_waiting(self._buf)

    # -- internals ---------------------------------------------------------

    def _search_waiting(self, buf: bytearray) -> None:
        """Search behind the waiting frame at the start of ``buf``; parse on from a packet found there."""
        found = self._search(buf, len(buf))
        if found >= 0:
            self._report(PacketError.TRUNCATED, 0, found)
            self._parse(bytes(buf), found)

    def _report(self, code: PacketError, pos: int, skip: int) -> None:
        """Count an error at ``pos`` after which ``skip`` bytes are dropped."""
        self.bytes_dropped += skip
        self._consecutive += 1
        self.errors += 1
        self.error_counts[code] += 1
        info = ErrorInfo(code, self._base + pos, self._consecutive)
        self.last_error = info
        if self.on_error is not None:
            try:
                self.on_error(info)
            except Exception as exc:  # a broken callback must not stop the parser
                self.callback_errors += 1
                self.last_callback_error = exc

    def _resync(self, code: PacketError, data: bytes, pos: int, end: int) -> int:
        """Report the bad header at ``pos``; returns where parsing resumes."""
        # The reference's rules: a wrong version skips to the next 03 02 pair,
        # a bad type or size one byte.
        nxt = self._next_version_pair(data, pos, end) if code is PacketError.UNSUPPORTED_VERSION else pos + 1
        self._report(code, pos, nxt - pos)
        return nxt

    def _parse(self, data: bytes, pos: int) -> None:
        """Parse ``data`` (the whole unconsumed stream) from ``pos``; keep the rest."""
        end = len(data)
        view = memoryview(data)
        specs = self._specs
        max_messages = self.max_messages
        max_buffer = self.max_buffer
        on_packet = self.on_packet
        # frame * OWN_COPY_RATIO < end, with the division done once per call
        own_copy_max = (end - 1) // OWN_COPY_RATIO
        need = 0
        while True:
            avail = end - pos
            if avail >= HEADER_SIZE:
                header = check_header(data, pos, specs, max_messages, max_buffer)
            elif avail >= 2 and (data[pos] != PROTOCOL_MAJOR or data[pos + 1] != PROTOCOL_MINOR):
                header = PacketError.UNSUPPORTED_VERSION
            else:
                break  # a plausible header start (or under 2 bytes): wait for the rest
            if not isinstance(header, tuple):
                pos = self._resync(header, data, pos, end)
                continue
            spec, flags, count, frame = header
            if frame > avail:
                self._pending = []
                self._scan = pos + 1
                found = self._search(data, end, base=pos)
                if found >= 0:
                    self._report(PacketError.TRUNCATED, pos, found - pos)
                    pos = found
                    continue
                need = frame
                break
            body_end = pos + frame - CRC_SIZE
            if _crc32(view[pos:body_end]) != _u32_unpack(data, body_end)[0]:
                self._report(PacketError.CHECKSUM_MISMATCH, pos, 1)
                pos += 1
                continue
            self._consecutive = 0
            self.packets += 1
            if frame <= own_copy_max:
                packet = PacketView(spec, flags, count, data[pos : pos + frame], HEADER_SIZE)
            else:
                packet = PacketView(spec, flags, count, data, pos + HEADER_SIZE)
            try:
                on_packet(packet)
            except Exception as exc:  # a broken handler must not lose the stream
                self.callback_errors += 1
                self.last_callback_error = exc
            pos = body_end + CRC_SIZE
        # Keep the unconsumed tail (at most one incomplete frame).
        self._base += pos
        self._buf = bytearray(view[pos:]) if pos < end else bytearray()
        view.release()
        self._need = need
        if need:
            # Candidate positions were found relative to data; rebase them.
            self._scan -= pos
            if self._pending:
                self._pending = [c - pos for c in self._pending]
        else:
            self._scan = 0
            self._pending = []

    @staticmethod
    def _next_version_pair(data: Buffer, pos: int, end: int) -> int:
        nxt = data.find(_VERSION_PAIR, pos + 1, end)
        if nxt >= 0:
            return nxt
        # Keep a trailing 0x03: it may be the first half of a pair.
        return end - 1 if data[end - 1] == PROTOCOL_MAJOR else end

    def _search(self, data: Buffer, end: int, base: int = 0) -> int:
        """Look behind the waiting header at ``base`` for a complete valid packet.

        Checks the remembered incomplete candidates, then new bytes from
        ``self._scan``. Returns the position of the first valid packet, or -1
        (state updated so that no byte is examined twice while nothing changes).
        """
        self.search_pending = False
        still: list[int] = []
        for c in self._pending:
            status = self._check_candidate(data, c, end)
            if status is _Candidate.VALID:
                return c
            if status is _Candidate.INCOMPLETE:
                still.append(c)
        # Comparisons rather than max(): this runs for every chunk that ends inside a packet.
        start = pos = self._scan if self._scan > base else base + 1
        budget = self.search_budget
        if budget is not None:
            # The budget is the call's: a search earlier in it (one that found a packet, and
            # parsing went on to another waiting frame) spent part of it.
            budget -= self.bytes_searched - self._call_from
            if budget < 1 and start < end:
                self._pending = still
                self._scan = start
                self.search_pending = True
                return -1
        # Pairs that start before ``limit`` (the last may end one byte past it).
        if budget is None or end - start <= budget:
            limit = stop = end
        else:
            limit = start + budget
            stop = limit + 1
        while True:
            c = data.find(_VERSION_PAIR, pos, stop)
            if c < 0:
                break
            status = self._check_candidate(data, c, end)
            if status is _Candidate.VALID:
                self.bytes_searched += c - start
                return c
            if status is _Candidate.INCOMPLETE:
                if len(still) >= MAX_CANDIDATES:
                    # Full: stop here and look at this candidate again later, never
                    # past it, so a real packet behind many fake headers is only
                    # delayed (until the waiting frame resolves), never lost.
                    self.bytes_searched += c - start
                    self._scan = c
                    self._pending = still
                    return -1
                still.append(c)
            pos = c + 1
        self._pending = still
        if limit < end:  # the budget is spent: the rest is for resume()
            self.bytes_searched += limit - start
            self._scan = limit
            self.search_pending = True
            return -1
        self.bytes_searched += end - start
        # A final 0x03 may pair with the next chunk's first byte.
        self._scan = pos if pos > end - 1 else end - 1
        return -1

    def _check_candidate(self, data: Buffer, c: int, end: int) -> _Candidate:
        if end - c < HEADER_SIZE:
            return _Candidate.INCOMPLETE
        header = check_header(data, c, self._specs, self.max_messages, self.max_buffer)
        if not isinstance(header, tuple):
            return _Candidate.DEAD
        frame = header[3]
        if end - c < frame:
            return _Candidate.INCOMPLETE
        body_end = c + frame - CRC_SIZE
        # A view made here, not per search: most searches find no candidate to check.
        with memoryview(data) as view:
            crc = _crc32(view[c:body_end])
        if crc != _u32_unpack(data, body_end)[0]:
            return _Candidate.DEAD
        return _Candidate.VALID
