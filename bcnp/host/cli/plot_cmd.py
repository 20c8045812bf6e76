"""``plot``: a PNG of the commanded against the driven path, from ``replay --telemetry``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ...defaults import KITBOT_TRACK_WIDTH_M
from .common import UserError, command_parser
from .extras import missing, require

if TYPE_CHECKING:
    from .common import Subparsers

EPILOG_PLOT = """examples:
  python -m bcnp replay paths/figure8.csv --telemetry run.csv
  python -m bcnp plot run.csv                      writes run.png
  python -m bcnp plot run.csv -o figure8.png
"""


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """The ``plot`` subcommand: commanded against driven path."""
    plot = command_parser(
        sub, "plot", "PNG of the commanded against the driven path, and vx/omega against time", EPILOG_PLOT
    )
    plot.add_argument("telemetry", metavar="TELEMETRY.csv", help="written by replay --telemetry")
    plot.add_argument("-o", "--output", metavar="OUT.png", help="default: the CSV's name with .png")
    plot.add_argument(
        "--track-width",
        type=float,
        default=None,
        help=f"wheel track in metres for odometry (default {KITBOT_TRACK_WIDTH_M}, the simulated chassis)",
    )
    return plot


def run(args: argparse.Namespace) -> int:
    require("plot", "matplotlib")
    from .plotting import DEFAULT_TRACK_WIDTH_M, PlotError, load_run, plot_run

    output = Path(args.output) if args.output else Path(args.telemetry).with_suffix(".png")
    width = DEFAULT_TRACK_WIDTH_M if args.track_width is None else args.track_width
    try:
        result = plot_run(load_run(args.telemetry), output, width)
    except PlotError as exc:
        raise UserError(str(exc)) from None
    except ImportError as exc:  # matplotlib imports, its Agg backend does not
        raise missing("plot", exc, "matplotlib") from None
    print(
        f"wrote {result.output}: {result.rows} samples, driven {result.driven_length_m:.2f} m, "
        f"commanded {result.commanded_length_m:.2f} m, end points {result.end_gap_m:.2f} m apart"
    )
    return 0
