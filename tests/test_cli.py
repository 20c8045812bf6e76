"""``python -m bcnp`` info and send, against a real robot-side server on loopback; the one-line
error and install command when an optional library is missing (tests/test_wheel_errors.py:
the same from an installed wheel)."""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from support import wait_until

import bcnp
from bcnp import Dispatcher, MessageQueue, MessageQueueConfig
from bcnp.host.cli import extras, main
from bcnp.transport import TcpServer, TransportConfig, UdpServer
from benchmarks.harness import ROOT
from benchmarks.harness.ports import free_port


@dataclass
class Robot:
    dispatcher: Dispatcher
    queue: MessageQueue
    tcp: TcpServer
    udp: UdpServer
    packets: list[bcnp.PacketView] = field(default_factory=list)


@pytest.fixture
def robot(schema: bcnp.Schema) -> Iterator[Robot]:
    dispatcher = Dispatcher(schema)
    queue = MessageQueue(MessageQueueConfig(capacity=1000))
    cfg = TransportConfig(host="127.0.0.1", port=0)
    r = Robot(dispatcher, queue, TcpServer(dispatcher, cfg), UdpServer(dispatcher, cfg))

    def handle(packet: bcnp.PacketView, now: float) -> None:
        r.packets.append(packet)
        queue.handle_packet(packet, now)

    dispatcher.register("DriveCmd", handle)
    r.tcp.start()
    r.udp.start()
    yield r
    r.tcp.close()
    r.udp.close()


def keepalive(packet: bcnp.PacketView) -> bool:
    """A bare keepalive: the client's thread sends one whenever 50 ms pass without a send,
    which a machine that holds the command between its connect and its batch lets happen."""
    return packet.count == 0 and packet.flags == 0


def after_keepalives(packets: list[bcnp.PacketView]) -> list[bcnp.PacketView]:
    """``packets`` from the first that is not a bare keepalive on."""
    for i, packet in enumerate(packets):
        if not keepalive(packet):
            return packets[i:]
    return []


def test_help_lists_subcommands_and_each_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    for command in ("info", "send", "replay", "monitor", "plot", "proxy"):
        assert command in listing
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "example" in capsys.readouterr().out


def test_info_shows_the_hash_and_message_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "0xE9EFEE08" in out and "DriveCmd" in out and "durationMs" in out
    assert main(["info", str(ROOT / "tests" / "data" / "test_schema.json")]) == 0
    assert "TestCmd" in capsys.readouterr().out


def test_info_with_a_bad_schema_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["info", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(bad) in err and err.count("\n") == 1
    assert main(["info", str(tmp_path / "missing.json")]) == 1
    assert "no such schema file" in capsys.readouterr().err


def test_send_delivers_one_batch_and_waits_for_it_to_run(
    robot: Robot, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["send", "--port", str(robot.tcp.port), "--clear", "1.0", "0", "150", "-0.5", "0.25", "100"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "robot schema 0xE9EFEE08" in out and "2 DriveCmd in 1 packet(s) with CLEAR_QUEUE" in out
    first, *rest = after_keepalives(robot.packets)
    assert first.clear_queue and [(m.vx, m.omega, m.durationMs) for m in first] == [
        (1.0, 0.0, 150),
        (-0.5, 0.25, 100),
    ]
    # It stayed connected for the 250 ms the batch takes, sending keepalives.
    assert len([p for p in rest if keepalive(p)]) >= 3


def test_send_over_udp_and_stop(robot: Robot, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", "--udp", "--port", str(robot.udp.port), "--no-wait", "0.3", "0", "1000"]) == 0
    wait_until(lambda: after_keepalives(robot.packets))
    assert after_keepalives(robot.packets)[0][0].vx == pytest.approx(0.3)
    robot.udp.close()  # unlock the peer so the next invocation (a new source port) can pair
    robot.udp.start()
    before = len(robot.packets)  # the first host's batch, and its goodbye keepalive
    assert main(["send", "--udp", "--port", str(robot.udp.port), "--stop"]) == 0
    wait_until(lambda: after_keepalives(robot.packets[before:]))
    stop = after_keepalives(robot.packets[before:])[0]
    assert stop.count == 0 and stop.clear_queue
    assert "sent: stop" in capsys.readouterr().out


def test_unreachable_robot_is_one_line_naming_host_and_port(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["send", "--port", str(port), "1", "0", "100"]) == 1
    err = capsys.readouterr().err
    assert err == f"error: cannot reach the robot at 127.0.0.1:{port} (Connection refused): " + (
        "start the simulator (python run.py sim --nogui, in the robot project) or check the robot's address "
        "and that its program is running\n"
    )


def test_schema_mismatch_names_both_hashes(
    test_schema: bcnp.Schema, capsys: pytest.CaptureFixture[str]
) -> None:
    server = TcpServer(Dispatcher(test_schema), TransportConfig(host="127.0.0.1", port=0))
    server.start()
    try:
        assert main(["send", "--port", str(server.port), "1", "0", "100"]) == 1
    finally:
        server.close()
    err = capsys.readouterr().err
    assert f"0x{test_schema.hash:08X}" in err and "0xE9EFEE08" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["1", "0"], "expected VX OMEGA MS triples"),
        (["fast", "0", "100"], "command 1 (fast 0 100)"),
        (["1", "0", "100", "1", "0", "-5"], "command 2 (1 0 -5)"),
        ([], "nothing to send"),
    ],
)
def test_bad_commands_are_refused_before_connecting(
    values: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["send", "--port", "1", *values]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_module_entry_point_exits_non_zero_without_a_traceback() -> None:
    port = free_port()
    run = subprocess.run(
        [sys.executable, "-m", "bcnp", "send", "--port", str(port), "1", "0", "100"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr and f"127.0.0.1:{port}" in run.stderr


@pytest.mark.parametrize("command", ["replay", "send"])
def test_ctrl_c_sends_a_stop_before_exiting(robot: Robot, command: str) -> None:
    args = [str(ROOT / "paths" / "square.csv")] if command == "replay" else ["0.5", "0", "10000"]
    # A test run started in the background (a CI job, `cmd &`) ignores SIGINT and a child
    # inherits that, so the child puts Python's own Ctrl-C handler back, as a terminal has it.
    python_m_bcnp = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'bcnp'; runpy.run_module('bcnp', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", python_m_bcnp, command, "--port", str(robot.tcp.port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        wait_until(lambda: any(p.count for p in robot.packets), timeout=30, what="the first commands")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in out and "sent stop" in out
    last = robot.packets[-1]
    assert last.count == 0 and last.clear_queue  # the stop: a zero-message CLEAR_QUEUE


def test_replayprogress_bar() -> None:
    from bcnp.host.cli.replay_cmd import progress_bar
    from bcnp.host.sessions.replay import Progress

    halfway = Progress(elapsed=6.3, total=12.6, sent=130, commands=252, packets=120, telemetry_rows=300)
    bar = progress_bar(halfway)
    assert bar.startswith("[" + "#" * 15 + "-" * 15 + "]") and " 50% " in bar
    assert "6.3/12.6 s" in bar and "sent 130/252" in bar and "telemetry 300" in bar
    assert "100%" in progress_bar(Progress(20.0, 12.6, 252, 252, 232, 0))  # capped after the end


def test_an_unwritable_telemetry_file_is_one_error_line(
    robot: Robot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "short.csv"
    path.write_text("0.2,0,40\n")
    out = tmp_path / "is-a-directory.csv"
    out.mkdir()
    assert main(["replay", str(path), "--port", str(robot.tcp.port), "--telemetry", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: cannot write") and err.count("\n") == 1


def run_in_thread(argv: list[str]) -> tuple[threading.Thread, list[int]]:
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(main(argv)), daemon=True)
    thread.start()
    return thread, status


def test_send_reconnects_and_sends_what_is_left_of_its_batch(
    robot: Robot, schema: bcnp.Schema, capsys: pytest.CaptureFixture[str]
) -> None:
    port = robot.tcp.port
    thread, status = run_in_thread(["send", "0.5", "0", "3000", "--port", str(port)])
    wait_until(lambda: len(robot.packets) == 1, what="the batch")
    robot.tcp.close()  # the robot program restarts
    again: list[bcnp.PacketView] = []
    dispatcher = Dispatcher(schema)
    dispatcher.register("DriveCmd", lambda packet, now: again.append(packet))
    restarted = TcpServer(dispatcher, TransportConfig(host="127.0.0.1", port=port))
    restarted.start()
    try:
        thread.join(15)
    finally:
        restarted.close()
    assert status == [0]
    out = capsys.readouterr().out
    assert "link lost at" in out and "back at" in out and "resumed at command 0" in out
    first = next(p for p in again if len(p))
    assert first.flags & bcnp.CLEAR_QUEUE
    (rest,) = list(first)
    assert rest.vx == pytest.approx(0.5) and 0 < rest.durationMs < 3000  # what was left, not the whole


def test_replay_gives_up_after_the_time_it_was_given(
    robot: Robot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "long.csv"
    path.write_text("0.5,0,100\n" * 100)
    argv = ["replay", str(path), "--port", str(robot.tcp.port), "--give-up-after", "0.3"]
    thread, status = run_in_thread(argv)
    wait_until(lambda: len(robot.packets) >= 1, what="the first packet")
    robot.tcp.close()
    thread.join(15)
    assert status == [1]
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("error: lost the link to the robot at 127.0.0.1:")
    assert "gave up after 0.3 s" in line
    assert "link lost at" in captured.out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--silence", "0"], "--silence must be > 0 seconds"),
        (["--give-up-after", "-1"], "--give-up-after must be >= 0 seconds"),
    ],
)
def test_bad_reconnect_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    path = tmp_path / "p.csv"
    path.write_text("0.5,0,100\n")
    assert main(["replay", str(path), "--port", str(free_port()), *option]) == 1
    assert capsys.readouterr().err.strip() == f"error: {message}"


# -- an optional library missing: one line, with the install command for where it runs ----------


def block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Makes ``modules`` (and any of their submodules already imported) fail to import, as where
    they are not installed."""
    for name in list(sys.modules):
        if name.partition(".")[0] in modules:
            monkeypatch.setitem(sys.modules, name, None)
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


PATHS = ROOT / "paths"
#: Each command and mode that needs an optional library: (arguments, what the line names, the
#: distribution, its module).
NEEDS = {
    "monitor": (["monitor", "--once"], "monitor", "pyntcore", "ntcore"),
    "plot": (["plot", "run.csv"], "plot", "matplotlib", "matplotlib"),
    "replay .path": (
        ["replay", "paths/s_curve.path"],
        "replay of paths/s_curve.path",
        "robotpy-pathplannerlib",
        "pathplannerlib",
    ),
    "replay .traj": (
        ["replay", "paths/j_turn.traj"],
        "replay of paths/j_turn.traj",
        "sleipnirgroup-choreolib",
        "choreo",
    ),
    "replay --follow": (
        ["replay", "paths/square.csv", "--follow"],
        "replay --follow",
        "robotpy-wpimath",
        "wpimath",
    ),
}


@pytest.mark.parametrize("case", NEEDS)
def test_in_the_checkout_a_missing_library_names_the_editable_install(
    case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, what, distribution, module = NEEDS[case]
    block(monkeypatch, module)
    monkeypatch.chdir(ROOT)
    assert main([*args, "--port", str(free_port())] if args[0] == "replay" else args) == 1
    captured = capsys.readouterr()
    install = f'{extras.python_command()} -m pip install -e ".[host]"'
    assert captured.err == (
        f"error: {what} needs {distribution} (module {module}), which is not installed in this "
        f"environment; install the host extra: {install}\n"
    )
    assert captured.out == ""


def test_outside_the_checkout_the_editable_install_names_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block(monkeypatch, "ntcore")
    monkeypatch.chdir(tmp_path)
    assert main(["monitor"]) == 1
    assert capsys.readouterr().err.endswith(f' -m pip install -e "{ROOT}[host]"\n')


def test_a_library_that_fails_to_import_is_one_line_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ntcore").mkdir()
    (tmp_path / "ntcore" / "__init__.py").write_text(
        "raise ImportError('libntcore.so: cannot open shared object file')\n"
    )
    for name in [m for m in sys.modules if m.partition(".")[0] == "ntcore"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(ROOT)
    assert main(["monitor", "--once"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "error: monitor needs pyntcore (module ntcore), which fails to import "
        "(libntcore.so: cannot open shared object file); install the host extra: "
    )


def test_an_optional_library_missing_anywhere_in_a_command_is_one_line_and_a_fault_is_not(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bcnp.host.cli import monitor_cmd as monitor

    def needs(name: str) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        return run

    monkeypatch.setattr(monitor, "run", needs("rich.live"))
    assert main(["monitor"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: monitor needs rich (module rich), which is not installed")
    monkeypatch.setattr(monitor, "run", needs("bcnp_no_such_module"))  # a fault of the program
    with pytest.raises(ModuleNotFoundError):
        main(["monitor"])


def fake_distribution(tmp_path: Path, direct_url: object | None) -> metadata.Distribution:
    """A distribution's metadata as pip installs it (only what the hint reads)."""
    info = tmp_path / "bcnp_robot-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.4\nName: bcnp-robot\nVersion: 0.1.0\n"
        'Provides-Extra: host\nRequires-Dist: pyntcore==2026.2.2; extra == "host"\n'
        "Requires-Dist: matplotlib>=3.8; extra == 'host'\n"
        'Provides-Extra: test\nRequires-Dist: pytest>=8; extra == "test"\n'
    )
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


def test_from_a_wheel_the_install_command_names_the_wheel_file_else_the_extras_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "my wheels" / "bcnp_robot-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    recorded = {"url": wheel.as_uri(), "archive_info": {"hash": "sha256=0"}}
    dist = fake_distribution(tmp_path, recorded)
    monkeypatch.setattr(extras, "source_checkout", lambda: None)
    monkeypatch.setattr(extras, "installed_distribution", lambda: dist)
    monkeypatch.setattr(extras, "python_command", lambda: "python")
    assert extras.recorded_archive(dist) == wheel
    assert extras.install_command() == f'python -m pip install "{wheel}[host]"'
    wheel.unlink()  # the file it was installed from is gone
    assert extras.recorded_archive(dist) is None
    requirements = '"pyntcore==2026.2.2" "matplotlib>=3.8"'
    assert extras.install_command() == f"python -m pip install {requirements}"
    # Installed from an index (no direct_url.json), or from a folder: the requirements too.
    for other in (
        None,
        {"url": ROOT.as_uri(), "dir_info": {}},
        {"url": "https://x/y.whl", "archive_info": {}},
    ):
        folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        assert extras.recorded_archive(fake_distribution(folder, other)) is None
    monkeypatch.setattr(extras, "installed_distribution", lambda: None)  # no metadata at all
    assert extras.install_command("ntcore") == "python -m pip install pyntcore"


def test_these_tests_run_from_the_checkout() -> None:
    assert extras.source_checkout() == ROOT  # so the editable install is named, whatever else is installed


def test_the_interpreter_is_named_as_the_user_can_type_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there: the full path
    assert extras.python_command() == sys.executable
    here = Path(sys.executable)
    monkeypatch.setenv("PATH", str(here.parent))  # this interpreter first on PATH
    expected = here.name if here.name in ("python", "python3") else sys.executable
    assert extras.python_command() == expected


def test_the_optional_libraries_are_the_host_extras() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    host = pyproject["project"]["optional-dependencies"]["host"]
    names = {re.split(r"[=<>!~\[; ]", requirement)[0] for requirement in host}
    assert set(extras.DISTRIBUTIONS.values()) == names
