"""The robot side of the BCNP link, and the command queue fed from a path file on the robot."""
