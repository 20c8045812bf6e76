"""Path files and the just-in-time schedule of ``replay``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcnp.host.sessions.core.replay import Schedule, due
from bcnp.paths import PathCommand, PathError, load_path, parse_path
from benchmarks.harness import ROOT

EXAMPLES = sorted((ROOT / "paths").iterdir())


def test_the_shipped_examples_load() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"square.csv", "figure8.csv", "slalom.json"} <= names
    lengths = {p.name: len(load_path(p)) for p in EXAMPLES}
    assert lengths["square.csv"] == 8
    assert lengths["figure8.csv"] > 200  # longer than the robot's queue: it must be streamed
    figure8 = load_path(ROOT / "paths" / "figure8.csv")
    assert {c.vx for c in figure8} == {1.0} and sum(c.duration_ms for c in figure8) == 12_600


def test_csv_with_comments_header_and_blank_lines() -> None:
    text = "# comment\n\nvx,omega,durationMs\n0.5, 0, 2000\n  # indented comment\n-0.25,1.5,20\n"
    assert parse_path(text, "p.csv") == [PathCommand(0.5, 0.0, 2000), PathCommand(-0.25, 1.5, 20)]
    assert parse_path("1,2,3\n", "p.csv") == [PathCommand(1.0, 2.0, 3)]  # no header needed


def test_json_triples_and_objects() -> None:
    text = '[[0.5, 0, 2000],\n {"vx": 1, "omega": -1, "durationMs": 50}]'
    assert parse_path(text, "p.json") == [PathCommand(0.5, 0.0, 2000), PathCommand(1.0, -1.0, 50)]


@pytest.mark.parametrize(
    ("name", "text", "line", "reason"),
    [
        ("p.csv", "vx,omega,durationMs\n1,0,100\n1,zero,100\n", 3, "omega must be a number, got 'zero'"),
        ("p.csv", "1,0,100\n1,0\n", 2, "expected 3 values (vx, omega, durationMs), got 2"),
        ("p.csv", "1,0,0\n", 1, "durationMs must be 1..65535, got 0"),
        ("p.csv", "1,0,70000\n", 1, "durationMs must be 1..65535, got 70000"),
        ("p.csv", "1,0,20.5\n", 1, "durationMs must be a whole number of milliseconds, got 20.5"),
        ("p.csv", "nan,0,20\n", 1, "vx must be finite, got nan"),
        ("p.csv", "1e9,0,20\n", 1, "vx 1e+09 is out of range"),
        ("p.json", "[\n  [1, 0, 100],\n  [1, 0, 100,]\n]", 3, "invalid JSON"),
        ("p.json", '[\n  [1, 0, 100],\n\n  {"vx": 1, "omega": 0}\n]', 4, "command 2 lacks durationMs"),
        ("p.json", '[\n  {"vx": 1, "omega": 0, "durationMs": 5, "speed": 1}\n]', 2, "unknown key(s) speed"),
        (
            "p.json",
            '[\n  [1, 0, 100],\n  "fast"\n]',
            3,
            "command 2 must be [vx, omega, durationMs] or an object",
        ),
        ("p.json", "[[true, 0, 100]]", 1, "vx must be a number, got true"),
        ("p.json", '{"commands": []}', 1, "expected a JSON list"),
    ],
)
def test_errors_name_the_file_line_and_reason(
    tmp_path: Path, name: str, text: str, line: int, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PathError) as err:
        load_path(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and reason in str(err.value)
    assert err.value.line == line


def test_empty_missing_and_binary_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("# nothing\n\n")
    with pytest.raises(PathError, match=r"empty\.csv: no commands in the file"):
        load_path(empty)
    with pytest.raises(PathError, match=r"missing\.csv: no such file"):
        load_path(tmp_path / "missing.csv")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"1,0,100\n\xff\xfe\x00\n")
    with pytest.raises(PathError, match=r"bin\.csv:2: not UTF-8 text"):
        load_path(binary)


# -- the just-in-time schedule ------------------------------------------------------------------


def test_schedule_knows_which_command_runs_when() -> None:
    s = Schedule([PathCommand(1, 0, 100), PathCommand(2, 0, 50), PathCommand(3, 0, 1000)])
    assert s.starts == [0.0, 0.1, 0.15, 1.15] and s.total == pytest.approx(1.15)
    assert [s.index_at(t) for t in (-0.01, 0.0, 0.099, 0.1, 0.149, 0.15, 1.149, 1.15, 5)] == [
        -1,
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]
    assert s.command_at(0.12) == PathCommand(2, 0, 50) and s.command_at(2.0) is None


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.integers(1, 3000), min_size=1, max_size=400),
    lead=st.sampled_from([0.2, 1.0, 2.5]),
    max_ahead=st.integers(1, 190),
)
def test_due_keeps_the_lead_without_ever_overfilling_the_queue(
    durations: list[int], lead: float, max_ahead: int
) -> None:
    schedule = Schedule([PathCommand(0.5, 0.0, ms) for ms in durations])
    # every moment where the answer can change (just before and at each start, and a lead
    # earlier), plus a regular grid
    edges = {e + d for s in schedule.starts for e in (s, s - lead) for d in (-1e-6, 0.0, 1e-6)}
    grid = {schedule.total * i / 300 for i in range(302)}
    sent = 0
    for t in sorted(x for x in edges | grid if x >= 0):
        sent = due(schedule, sent, t, lead, max_ahead)
        running = max(schedule.index_at(t), 0)
        # never more queued past the running command than allowed (the robot queue holds 200)
        assert sent - running <= max(max_ahead, 1)
        # everything starting within the lead is out, unless the cap holds it back
        starting_soon = sum(1 for start in schedule.starts[:-1] if start < t + lead)
        assert sent >= min(starting_soon, running + max_ahead, len(schedule))
    assert sent == len(schedule)


def test_the_figure8_is_sent_about_one_second_ahead() -> None:
    schedule = Schedule(load_path(ROOT / "paths" / "figure8.csv"))
    assert due(schedule, 0, 0.0, 1.0, 150) == 20  # 20 x 50 ms: the first second
    assert due(schedule, 20, 0.5, 1.0, 150) == 30
    assert due(schedule, 0, 0.0, 1.0, 5) == 5  # the cap wins over the lead
