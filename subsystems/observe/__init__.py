"""What observes the robot: the Network/* keys, the data log, the field view, the loop's timing."""
