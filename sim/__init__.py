"""The simulator's device models, as their makers document them (docs/robot.md, "Device models").

``settings`` (every ``BCNP_SIM_*`` variable, read once), ``chassis`` (WPILib's drivetrain model,
the motors mounted as on the robot, the disturbances), ``wirings`` (each wiring's devices
between the code and the chassis), ``sparkmax`` (the SPARK MAX firmware's closed loop),
``kitbot`` (PWM controllers, FPGA encoders), ``sensors`` (velocity filters, CAN status
frames, the FPGA's rate), ``gyro``, ``battery`` (sag and brownout), ``nt`` (the simulator's
NetworkTables). ``physics.py`` steps them.
"""
