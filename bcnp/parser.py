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

import struct
import zlib
from collections import Counter
from collections.abc import Callable

from .schema import MessageSpec, Schema
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
)

__all__ = ["StreamParser"]

_header_unpack = struct.Struct(">BBBHH").unpack_from
_u32_unpack = struct.Struct(">I").unpack_from
_crc32 = zlib.crc32
_VERSION_PAIR = bytes((PROTOCOL_MAJOR, PROTOCOL_MINOR))

#: How many not-yet-complete candidate headers behind a waiting frame are
#: tracked at once; more are ignored until the waiting frame resolves.
MAX_CANDIDATES = 64

#: Bytes behind a waiting header searched per step. One ``find`` holds the
#: interpreter lock throughout (about 30 us for 16 KiB of DriveCmds, whose
#: bytes hold many 0x03); between steps ``pause`` may let the robot loop run.
SEARCH_STEP = 16 * 1024

# _check_candidate results
_VALID, _DEAD, _INCOMPLETE = 1, 0, -1

Buffer = bytes | bytearray


class StreamParser:
    """Frames BCNP packets out of arbitrarily chunked bytes.

    ``on_packet(view)`` is called for every packet whose CRC checks out, in
    stream order; ``on_error(ErrorInfo)`` for every resync. An exception
    raised by a callback is counted in ``callback_errors`` (the last one kept
    in ``last_callback_error``) and never escapes :meth:`push`.

    ``max_buffer`` bounds the bytes held while a frame is incomplete; by
    default it is the largest legal packet of the schema, so every packet the
    schema allows can be received.

    ``pause()``, if given, is called between steps of :data:`SEARCH_STEP`
    bytes while the bytes behind a waiting header are searched, so a thread
    that must not wait long (the robot loop, see
    :class:`~bcnp.transport.base.LoopPriority`) gets the interpreter within
    one step even while a 655 KB packet streams in.
    """

    def __init__(
        self,
        schema: Schema,
        on_packet: Callable[[PacketView], object],
        on_error: Callable[[ErrorInfo], object] | None = None,
        max_buffer: int | None = None,
        max_messages: int = MAX_MESSAGES_PER_PACKET,
        pause: Callable[[], object] | None = None,
    ) -> None:
        if not 0 <= max_messages <= MAX_MESSAGES_PER_PACKET:
            raise ValueError(f"max_messages must be 0..{MAX_MESSAGES_PER_PACKET}")
        largest = MIN_PACKET_SIZE + max_messages * schema.max_wire_size
        if max_buffer is None:
            max_buffer = largest
        if max_buffer < MIN_PACKET_SIZE:
            raise ValueError(f"max_buffer must be at least {MIN_PACKET_SIZE} bytes")
        self.schema = schema
        self.on_packet = on_packet
        self.on_error = on_error
        self.max_buffer = max_buffer
        self.max_messages = max_messages
        self.pause = pause
        self._specs: dict[int, tuple[MessageSpec, int]] = {m.id: (m, m.wire_size) for m in schema.messages}
        # Counters (read from any thread; written only by the pushing thread).
        self.bytes_received = 0
        #: Bytes that were in no packet: skipped while resynchronising, or
        #: buffered when :meth:`reset` dropped them. Always
        #: ``bytes_received == bytes of delivered packets + bytes_dropped + buffered``.
        self.bytes_dropped = 0
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

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    @property
    def consecutive_errors(self) -> int:
        return self._consecutive

    def push(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes; delivers every packet they complete, in order."""
        size = len(data)
        if not size:
            return
        self.bytes_received += size
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                found = self._search(buf, len(buf))
                if found < 0:
                    return
                self._report(PacketError.TRUNCATED, 0, found)
                start = found
            else:
                start = 0
            work = bytes(buf)
        else:
            work = data if type(data) is bytes else bytes(data)
            start = 0
        self._parse(work, start)

    # -- internals ---------------------------------------------------------

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

    def _parse(self, data: bytes, pos: int) -> None:
        """Parse ``data`` (the whole unconsumed stream) from ``pos``; keep the rest."""
        end = len(data)
        view = memoryview(data)
        specs = self._specs
        max_messages = self.max_messages
        max_buffer = self.max_buffer
        on_packet = self.on_packet
        need = 0
        while True:
            avail = end - pos
            if avail >= HEADER_SIZE:
                major, minor, flags, type_id, count = _header_unpack(data, pos)
                if major != PROTOCOL_MAJOR or minor != PROTOCOL_MINOR:
                    nxt = self._next_version_pair(data, pos, end)
                    self._report(PacketError.UNSUPPORTED_VERSION, pos, nxt - pos)
                    pos = nxt
                    continue
            elif avail >= 2:
                if data[pos] != PROTOCOL_MAJOR or data[pos + 1] != PROTOCOL_MINOR:
                    nxt = self._next_version_pair(data, pos, end)
                    self._report(PacketError.UNSUPPORTED_VERSION, pos, nxt - pos)
                    pos = nxt
                    continue
                break  # a plausible header start: wait for the rest
            else:
                break
            entry = specs.get(type_id)
            if entry is None:
                self._report(PacketError.UNKNOWN_MESSAGE_TYPE, pos, 1)
                pos += 1
                continue
            spec, wire_size = entry
            frame = MIN_PACKET_SIZE + count * wire_size
            if count > max_messages or frame > max_buffer:
                self._report(PacketError.TOO_MANY_MESSAGES, pos, 1)
                pos += 1
                continue
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
            if frame << 3 < end:
                # A small packet in a big chunk gets its own bytes, so a queue
                # of views never pins chunks many times the data it holds.
                packet = PacketView(spec, flags, count, data[pos : pos + frame], HEADER_SIZE)
            else:
                packet = PacketView(spec, flags, count, data, pos + HEADER_SIZE)
            try:
                on_packet(packet)
            except Exception as exc:  # a broken handler must not lose the stream
                self.callback_errors += 1
                self.last_callback_error = exc
            pos = body_end + CRC_SIZE
        view.release()
        # Keep the unconsumed tail (at most one incomplete frame).
        self._base += pos
        self._buf = bytearray(data[pos:]) if pos < end else bytearray()
        self._need = need
        if need:
            # Candidate positions were found relative to data; rebase them.
            self._scan -= pos
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
        with memoryview(data) as view:
            still: list[int] = []
            found = -1
            for c in self._pending:
                status = self._check_candidate(data, view, c, end)
                if status == _VALID:
                    found = c
                    break
                if status == _INCOMPLETE:
                    still.append(c)
            if found >= 0:
                return found
            pos = max(self._scan, base + 1)
            pause = self.pause
            step_end = pos + SEARCH_STEP
            while True:
                if pos >= step_end:  # a step's worth searched, with or without candidates
                    if pause is not None:
                        pause()
                    step_end = pos + SEARCH_STEP
                # Pairs starting before step_end (the last may end at step_end).
                limit = step_end + 1
                if limit >= end:
                    c = data.find(_VERSION_PAIR, pos, end)
                    if c < 0:
                        break
                else:
                    c = data.find(_VERSION_PAIR, pos, limit)
                    if c < 0:
                        pos = step_end
                        continue
                status = self._check_candidate(data, view, c, end)
                if status == _VALID:
                    return c
                if status == _INCOMPLETE:
                    if len(still) >= MAX_CANDIDATES:
                        # Full: stop here and look at this candidate again later, never
                        # past it, so a real packet behind many fake headers is only
                        # delayed (until the waiting frame resolves), never lost.
                        self._scan = c
                        self._pending = still
                        return -1
                    still.append(c)
                pos = c + 1
            # A final 0x03 may pair with the next chunk's first byte.
            self._scan = max(pos, end - 1)
            self._pending = still
            return -1

    def _check_candidate(self, data: Buffer, view: memoryview, c: int, end: int) -> int:
        if end - c < HEADER_SIZE:
            return _INCOMPLETE
        _, _, _, type_id, count = _header_unpack(data, c)
        entry = self._specs.get(type_id)
        if entry is None or count > self.max_messages:
            return _DEAD
        frame = MIN_PACKET_SIZE + count * entry[1]
        if frame > self.max_buffer:
            return _DEAD
        if end - c < frame:
            return _INCOMPLETE
        body_end = c + frame - CRC_SIZE
        if _crc32(view[c:body_end]) != _u32_unpack(data, body_end)[0]:
            return _DEAD
        return _VALID
