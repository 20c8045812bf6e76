"""A host drives; if none has connected a few seconds into autonomous, a path file does."""

from __future__ import annotations

import logging
from pathlib import Path

import constants
from autonomous import PathMode
from subsystems.link.bcnp_link import BcnpLink
from subsystems.link.local_path import ControllerWatch

log = logging.getLogger("autonomous")


class BcnpHostFallbackPath(PathMode):
    """``AUTO_FALLBACK_WAIT_S`` into autonomous with no controller connected so far, plays
    ``AUTO_FALLBACK_PATH``. A controller that connects before then drives, and the path never
    starts; one that connects later takes over at once: its receive thread drops the queued
    path and the path queues nothing more (subsystems/link/local_path.py)."""

    MODE_NAME = "BCNP host, fallback path"

    def __init__(self, link: BcnpLink) -> None:
        super().__init__(link)
        self._watch = ControllerWatch(link)
        self._phase = "waiting"
        self._load(Path(constants.AUTO_PATHS_DIR) / constants.AUTO_FALLBACK_PATH)

    def on_enable(self) -> None:
        self._watch.mark()
        self._phase = "waiting"

    def on_iteration(self, time_elapsed: float) -> None:
        if self._phase == "waiting":
            if self._watch.came():
                self._phase = "host"
                log.info("autonomous: a controller connected: it drives, no fallback path")
            elif time_elapsed >= constants.AUTO_FALLBACK_WAIT_S:
                if self.path is None:
                    self._phase = "refused"
                    self._refuse()
                else:
                    self._phase = "path"
                    log.warning(
                        "autonomous: no controller %g s into autonomous: driving %s",
                        constants.AUTO_FALLBACK_WAIT_S,
                        self.path.name,
                    )
                    self.path.start()
        if self._phase == "path" and self.path is not None:
            self.path.feed()
