"""Robot hardware owners and the robot side of the BCNP link."""
