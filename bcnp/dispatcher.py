"""Dispatcher: routes parsed packets to per-type handlers and tracks link liveness.

Implements the spec's "Dispatcher" role: bytes in (with the receive time),
packets out to the handler registered for their message type. Two ways in:
:meth:`Dispatcher.push` feeds bytes to a :class:`~bcnp.parser.StreamParser`
it owns; :meth:`Dispatcher.dispatch` takes packets framed elsewhere (by a
:class:`~bcnp.connection.Connection`, one per connection, as the transports do).
Either way it counts what it could not deliver.
"""

from __future__ import annotations

from collections.abc import Callable

from .defaults import LINK_TIMEOUT_S
from .parser import StreamParser
from .schema import MessageSpec, Schema
from .timebase import elapsed_over
from .wire import MAX_MESSAGES_PER_PACKET, ErrorInfo, PacketView

__all__ = ["Dispatcher", "PacketHandler"]

#: ``handler(packet, now)``: ``now`` is the receive time passed to :meth:`Dispatcher.push`.
PacketHandler = Callable[[PacketView, float], object]


class Dispatcher:
    """Feeds bytes to a parser and hands each packet to its type's handler.

    ``push(data, now)`` or ``dispatch(packet, now)`` is called by one thread
    (a transport's receive thread); counters and :meth:`link_alive` may be
    read from any thread.
    A handler that raises is counted in ``handler_errors`` and never stops
    the stream. Packets of a type with no handler are counted in
    ``unhandled_packets`` but still prove the link alive.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        link_timeout: float = LINK_TIMEOUT_S,
        on_error: Callable[[ErrorInfo], object] | None = None,
        max_buffer: int | None = None,
        max_messages: int = MAX_MESSAGES_PER_PACKET,
    ) -> None:
        if link_timeout < 0:
            raise ValueError("link_timeout must be >= 0 seconds")
        self.schema = schema
        self.link_timeout = link_timeout
        #: Parser limits, for this dispatcher's own parser and for the connections that feed it.
        self.max_buffer = max_buffer
        self.max_messages = max_messages
        self.on_error = on_error
        self._handlers: dict[int, PacketHandler] = {}
        self._now = 0.0
        self.last_receive_time: float | None = None
        self.packets_received = 0
        #: Packets whose handler has returned (or raised), or that had none: another thread that
        #: waits for a packet to be queued waits on this, never on ``packets_received``, which
        #: counts a packet before its handler runs.
        self.packets_done = 0
        self.unhandled_packets = 0
        self.parser = StreamParser(
            schema,
            self._on_packet,
            on_error,
            max_buffer=max_buffer,
            max_messages=max_messages,
        )

    def _spec(self, type_or_name: int | str | MessageSpec) -> MessageSpec:
        if isinstance(type_or_name, MessageSpec):
            spec = self.schema.get(type_or_name.id)
            if spec is not type_or_name and (spec is None or spec.name != type_or_name.name):
                raise KeyError(f"{type_or_name.name} is not a message of this schema")
            return type_or_name
        return self.schema[type_or_name]

    def register(self, type_or_name: int | str | MessageSpec, handler: PacketHandler) -> None:
        """Send packets of this message type to ``handler(packet, now)`` (replaces any)."""
        if not callable(handler):
            raise TypeError("handler must be callable as handler(packet, now)")
        self._handlers[self._spec(type_or_name).id] = handler

    def unregister(self, type_or_name: int | str | MessageSpec) -> None:
        self._handlers.pop(self._spec(type_or_name).id, None)

    def push(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Feed received bytes; ``now`` is the receive time in seconds."""
        self._now = now
        self.parser.push(data)

    def reset(self) -> None:
        """A new connection: drop partial frames and forget the last receive time."""
        self.parser.reset()
        self.last_receive_time = None

    def link_alive(self, now: float) -> bool:
        """A packet arrived no more than ``link_timeout`` before ``now``.

        Compared in whole microseconds (:func:`~bcnp.timebase.elapsed_over`), as
        :class:`~bcnp.queue.MessageQueue` does, so both agree at the boundary
        (float seconds would not: 0.55 - 0.35 is 0.20000000000000007)."""
        last = self.last_receive_time
        return last is not None and not elapsed_over(now, last, self.link_timeout)

    @property
    def parse_errors(self) -> int:
        return self.parser.errors

    @property
    def handler_errors(self) -> int:
        return self.parser.callback_errors

    @property
    def last_handler_error(self) -> BaseException | None:
        return self.parser.last_callback_error

    def dispatch(self, packet: PacketView, now: float) -> None:
        """Route one packet, received at ``now``, to its type's handler.

        An exception raised by the handler propagates: the parser or
        connection that framed the packet counts it and goes on."""
        self.last_receive_time = now
        self.packets_received += 1
        handler = self._handlers.get(packet.type_id)
        if handler is None:
            self.unhandled_packets += 1
            self.packets_done += 1
            return
        try:
            handler(packet, now)
        finally:
            self.packets_done += 1

    def _on_packet(self, packet: PacketView) -> None:
        self.dispatch(packet, self._now)
