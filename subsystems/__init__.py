"""The robot's parts: the drivetrain (``drivetrain/``), the robot side of the BCNP link (``link/``),
and what observes them (``observe/``)."""
