"""``python -m bcnp``: see :mod:`bcnp.host.cli`."""

from .host.cli import main

raise SystemExit(main())
