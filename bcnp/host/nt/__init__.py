"""The host's NetworkTables side: the robot's keys, its mode and its pose through a real NT4 client."""
