"""The sessions' sans-I/O cores: outages, the replay's schedule, the follower.
No sockets, threads or clocks."""
