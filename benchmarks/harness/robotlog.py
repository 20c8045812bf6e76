"""What the robot's data log says it did: each command it made active, on the wall clock.

Clocks. A data log's timestamps are the robot's FPGA time in microseconds; in
the simulator that is time since the HAL started, so a restarted robot counts
from about 0 again, in a new file. WPILib's ``DataLogManager`` writes a
``systemTime`` entry every 5 s once the system time is valid (always, in the
simulator): its value is the wall clock (``gettimeofday``, µs since the
epoch, the scale of ``time.time()``) and its record's timestamp the FPGA time,
read one right after the other by the log thread. Each file's offset
(wall - FPGA) is the median over its anchors (:class:`LogClock`), so one
anchor read across a preemption does not move it. Error bound, per file: the
anchors' spread (``LogClock.spread_us``: 0 to 1 µs in the simulator, where both
clocks advance together, the FPGA clock being the monotonic clock since the
HAL started). A system clock stepped or slewed during the run (NTP slews at
most 500 ppm: 0.5 ms per second) moves records away from the median anchor by
as much, and shows in the spread, for records between the first and last anchor. Checked
end to end: single commands sent to an idle robot at known ``time.time()``
moments start, by the mapped log, 1.1 to 20.9 ms later, the spread of one
20 ms tick with nothing below it, so the mapping is right to about a millisecond.
The first anchor is written 5 s after the robot starts, so a robot that ran
less than that (or was killed sooner) leaves a log without one: its commands
cannot be placed on the wall clock, and :func:`read_command_starts` says so.

The log thread writes the file every 0.25 s: a killed or stopped robot (SIGTERM
does not flush it either) loses what it recorded in its last quarter second;
read the log again until the expected entries are there while the robot still runs
(:func:`wait_for_starts`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The data log entries of each command made active (subsystems/observe/recording.py).
VX_ENTRY, OMEGA_ENTRY, DURATION_ENTRY = "BCNP/Command/Vx", "BCNP/Command/Omega", "BCNP/Command/DurationMs"
#: DataLogManager's wall-clock anchor: value µs since the epoch, timestamp FPGA µs.
SYSTEM_TIME_ENTRY = "systemTime"
#: The robot writes its data log every 0.25 s: this long after a moment, the log holds it.
LOG_WRITE_S = 1.0


@dataclass(frozen=True)
class CommandStart:
    """A command as the robot made it active (after clamping), from its data log."""

    #: Seconds since the epoch (the ``time.time()`` scale) when the robot made it active.
    wall_time: float
    vx: float
    omega: float
    duration_ms: int


@dataclass(frozen=True)
class LogClock:
    """One data log's robot time on the wall clock: wall µs = FPGA µs + ``offset_us``."""

    offset_us: float
    #: Largest minus smallest anchor offset (µs): how far the file's anchors disagree.
    spread_us: float
    anchors: int

    def wall(self, fpga_us: int) -> float:
        """``time.time()`` seconds of a record stamped ``fpga_us``."""
        return (fpga_us + self.offset_us) / 1e6


#: How a record's value is read, by its entry's type (any other type: its raw bytes).
_GETTERS = {
    "double": "getDouble",
    "float": "getFloat",
    "int64": "getInteger",
    "boolean": "getBoolean",
    "string": "getString",
    "json": "getString",
    "double[]": "getDoubleArray",
    "float[]": "getFloatArray",
    "int64[]": "getIntegerArray",
    "boolean[]": "getBooleanArray",
    "string[]": "getStringArray",
}

#: (entry name, entry type, timestamp µs, value) of one data record.
Record = tuple[str, str, int, Any]


def _whole_records(data: bytes) -> int:
    """How many bytes at the start of ``data`` (which starts at a record) are whole records.
    A record's first byte gives the lengths of its entry id, payload size and timestamp (one
    to four, four and eight bytes: bits 0-1, 2-3 and 4-6, each length less one)."""
    pos, n = 0, len(data)
    while pos < n:
        bits = data[pos]
        id_len, size_len, stamp_len = (bits & 3) + 1, ((bits >> 2) & 3) + 1, ((bits >> 4) & 7) + 1
        size_at = pos + 1 + id_len
        head = 1 + id_len + size_len + stamp_len
        if pos + head > n:
            break
        end = pos + head + int.from_bytes(data[size_at : size_at + size_len], "little")
        if end > n:
            break
        pos = end
    return pos


class LogTail:
    """One ``.wpilog`` read as it grows: each :meth:`read` hands WPILib's ``DataLogReader`` only
    the whole records written since the last read (behind the file's header), keeping the
    entries' start records from read to read. A log polled while a robot appends to it is then
    parsed once in all, not once per look. ``records`` is everything read so far, in order."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.records: list[Record] = []
        self._header = b""
        self._offset = 0
        self._entries: dict[int, tuple[str, str]] = {}

    def read(self) -> list[Record]:
        """The records written since the last read (whole ones; a record being written waits
        for the next read)."""
        from wpiutil.log import DataLogReader

        with open(self.path, "rb") as f:
            if not self._header:
                head = f.read(12)  # "WPILOG", version (2 bytes), extra header's length (4 bytes)
                if len(head) < 12:
                    return []
                extra = f.read(int.from_bytes(head[8:12], "little"))
                if len(extra) < int.from_bytes(head[8:12], "little"):
                    return []
                self._header, self._offset = head + extra, 12 + len(extra)
            f.seek(self._offset)
            data = f.read()
        whole = _whole_records(data)
        if whole == 0:
            return []
        buffer = self._header + data[:whole]
        reader = DataLogReader(memoryview(buffer))  # bytes themselves would be taken for a file name
        if not reader.isValid():
            raise ValueError(f"{self.path}: not a data log")
        new: list[Record] = []
        entries = self._entries
        for record in reader:  # the values are read here, while ``buffer`` is alive
            if record.isStart():
                start = record.getStartData()
                entries[start.entry] = (start.name, start.type)
            elif not record.isControl():
                entry = entries.get(record.getEntry())
                if entry is not None:
                    getter = _GETTERS.get(entry[1], "getRaw")
                    new.append((entry[0], entry[1], record.getTimestamp(), getattr(record, getter)()))
        self._offset += whole
        self.records += new
        return new

    def replaced(self) -> bool:
        """Whether the file is now shorter than what was read of it: another file in its place."""
        return self.path.stat().st_size < self._offset


_tails: dict[Path, LogTail] = {}


def records(path: Path) -> list[Record]:
    """Every data record of a ``.wpilog`` so far: (entry name, entry type, timestamp µs,
    value). Each file is read from where the last call left it (:class:`LogTail`)."""
    key = Path(path).resolve()
    tail = _tails.get(key)
    if tail is None or tail.replaced():
        tail = _tails[key] = LogTail(key)
    tail.read()
    return tail.records


def log_clock(path: Path) -> LogClock | None:
    """The file's FPGA → wall-clock mapping from its ``systemTime`` anchors; ``None`` without one."""
    offsets = [value - stamp for name, _, stamp, value in records(path) if name == SYSTEM_TIME_ENTRY]
    if not offsets:
        return None
    return LogClock(float(statistics.median(offsets)), float(max(offsets) - min(offsets)), len(offsets))


def read_command_starts(log_dir: Path) -> list[CommandStart]:
    """Every command made active in every ``.wpilog`` in ``log_dir`` (a restarted
    robot writes a new file), on the wall clock, in time order.

    Raises ``ValueError`` for a file with commands but no ``systemTime`` anchor (a
    robot that ran less than 5 s): its commands cannot be placed in time."""
    starts: list[CommandStart] = []
    for path in sorted(Path(log_dir).glob("*.wpilog")):
        vx: list[tuple[int, float]] = []
        omega: list[float] = []
        duration: list[int] = []
        offsets: list[int] = []
        for name, _, stamp, value in records(path):
            if name == VX_ENTRY:
                vx.append((stamp, value))
            elif name == OMEGA_ENTRY:
                omega.append(value)
            elif name == DURATION_ENTRY:
                duration.append(value)
            elif name == SYSTEM_TIME_ENTRY:
                offsets.append(value - stamp)
        if not vx:
            continue
        if not offsets:
            raise ValueError(
                f"{path}: {len(vx)} command(s) but no systemTime entry to place them on the wall "
                "clock (DataLogManager writes the first 5 s after the robot starts)"
            )
        offset = statistics.median(offsets)
        # The three entries are written together, in this order; a log cut by a kill
        # may end inside a triple: the incomplete one is left out.
        for (stamp, v), w, ms in zip(vx, omega, duration, strict=False):
            starts.append(CommandStart((stamp + offset) / 1e6, v, w, ms))
    starts.sort(key=lambda s: s.wall_time)
    return starts


def wait_for_starts(
    log_dir: Path,
    done: Callable[[list[CommandStart]], bool],
    timeout: float = 6.0,
    since: float = -float("inf"),
    until: float = float("inf"),
) -> list[CommandStart]:
    """The commands started between two wall times (:func:`read_command_starts`), read again
    every 0.1 s until ``done`` says they are all there (the log is written every 0.25 s) or
    ``timeout`` s have passed. A log without its first wall-clock anchor yet (a robot that has
    run less than 5 s) counts as empty until then; after it, its ``ValueError`` is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            starts = [s for s in read_command_starts(log_dir) if since <= s.wall_time <= until]
        except ValueError:
            if time.monotonic() > deadline:
                raise
            starts = []
        if done(starts) or time.monotonic() > deadline:
            return starts
        time.sleep(0.1)


def read_strings(log_dir: Path, entry: str) -> list[tuple[float, str]]:
    """Every value of the string entry ``entry`` in every ``.wpilog`` in ``log_dir``, on the
    wall clock (files without a ``systemTime`` anchor are left out), in time order."""
    found: list[tuple[float, str]] = []
    for path in sorted(Path(log_dir).glob("*.wpilog")):
        values = [(stamp, value) for name, _, stamp, value in records(path) if name == entry]
        clock = log_clock(path) if values else None
        if clock is not None:
            found += [(clock.wall(stamp), value) for stamp, value in values]
    found.sort()
    return found
