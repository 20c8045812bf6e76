"""Remake the README's pictures: the sim GUI after a figure-8 replay, and that run's plot.

    python docs/make_pictures.py

Linux only (a virtual X display): needs Xvfb, Mesa software OpenGL and
ImageMagick (Debian/Ubuntu: ``sudo apt install xvfb libgl1-mesa-dri
libglx-mesa0 imagemagick``) and the project installed with the ``sim`` and
``host`` extras. Ports 5800 and 5810 must be free (no other sim running).

It copies the project to a temporary folder, starts ``robotpy sim`` there the
way ``python run.py sim`` does (in ``.sim/`` with the shipped layout), with the GUI on
a 1280x720 virtual display in autonomous, replays ``paths/figure8.csv`` with
``python -m bcnp replay --telemetry``, takes a screenshot, plots the
telemetry, and writes both PNGs to ``docs/images/``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import run  # noqa: E402 - the project's run.py: how `python run.py sim` starts the sim

IMAGES = ROOT / "docs" / "images"
SCREEN = "1280x720x24"
SKIP = shutil.ignore_patterns(
    ".git", ".venv*", ".sim", ".*cache", ".hypothesis", "__pycache__", "*.egg-info", "build", "dist", "docs"
)


def die(message: str) -> None:
    print(f"make_pictures: {message}", file=sys.stderr)
    raise SystemExit(1)


def port_free(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_display() -> tuple[subprocess.Popen[bytes], str]:
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN, "-nolisten", "tcp"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        xvfb.kill()
        die("Xvfb did not start")
    return xvfb, f":{number}"


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> int:
    if not sys.platform.startswith("linux"):
        die("needs Linux (Xvfb)")
    for tool in ("Xvfb", "import"):
        if shutil.which(tool) is None:
            die(f"{tool} not found: sudo apt install xvfb libgl1-mesa-dri libglx-mesa0 imagemagick")
    if not (port_free(5800, socket.SOCK_STREAM) and port_free(5810, socket.SOCK_STREAM)):
        die("port 5800 or 5810 is in use: stop the running simulator first")
    IMAGES.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bcnp-pictures-") as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(ROOT, project, ignore=SKIP)
        telemetry = Path(tmp) / "figure8.csv"
        xvfb, display = start_display()
        env = dict(os.environ, DISPLAY=display, BCNP_SIM_AUTONOMOUS="1", BCNP_PORT="5800")
        log = open(Path(tmp) / "sim.log", "wb")  # noqa: SIM115 - closed in finally
        workdir, command = run.sim_command(project, python, [])
        sim = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=log)
        try:
            time.sleep(3)  # the GUI opens its windows; the replay below waits for the robot anyway
            replay = [python, "-m", "bcnp", "replay", "paths/figure8.csv", "--telemetry", str(telemetry)]
            for _ in range(20):
                result = subprocess.run(replay, cwd=project, env=env, capture_output=True, text=True)
                if result.returncode == 0 or "cannot reach" not in result.stderr or sim.poll() is not None:
                    break
                time.sleep(1)
            print(result.stdout, end="")
            if result.returncode != 0:
                die(f"replay failed: {result.stderr.strip()} (sim log: {Path(tmp) / 'sim.log'})")
            time.sleep(0.5)  # a few more frames of the robot at rest
            sim_png = IMAGES / "sim-figure8.png"
            subprocess.run(["import", "-window", "root", "-strip", str(sim_png)], env=env, check=True)
            print(f"wrote {sim_png.relative_to(ROOT)}")
        finally:
            stop(sim)
            stop(xvfb)
            log.close()
        plot_png = IMAGES / "plot-figure8.png"
        plot = [python, "-m", "bcnp", "plot", str(telemetry), "-o", str(plot_png)]
        subprocess.run(plot, cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
