"""The default: a host drives over BCNP, as autonomous always did."""

from __future__ import annotations

from autonomous import Mode


class BcnpHost(Mode):
    """Runs the active BCNP command; none: stop."""

    MODE_NAME = "BCNP host"
    DEFAULT = True
