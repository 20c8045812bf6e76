"""``python -m bcnp``: see :mod:`bcnp.cli`."""

from .cli import main

raise SystemExit(main())
