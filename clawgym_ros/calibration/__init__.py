"""Sim-to-real calibration: fit the simulator's physical parameters to a recorded robot log.

Pieces (pure cores, no rclpy, no mujoco). The simulator side - the parameter table, the active
calibration, a model at fitted values, batched rollouts - lives in ``sim/``
(:mod:`clawgym_ros.sim.calibration_params`, :mod:`clawgym_ros.sim.active_calibration`,
:mod:`clawgym_ros.sim.calibrated`).


* :mod:`.log` - a recorded robot log (MCAP file or rosbag2 folder) read into arrays, and the
  package's writer of such logs;
* :mod:`.excitation` - smooth, seeded multi-sine joint targets within joint and velocity
  limits, checked collision-free (what to send the robot while recording);
* :mod:`.replay` - the recorded commands replayed in the simulator at given parameter values;
* :mod:`.twin` - a stand-in real robot (MuJoCo with hidden parameter offsets, latency, encoder
  bias and sensor noise) that records such a log, for tests and benchmarks;
* :mod:`.fit` - multi-start bounded least squares, intervals and identifiability;
* :mod:`.artifact` - the ``calibration`` artifact (values, intervals, RMSE, HTML page);
* :mod:`.apply` - a calibration artifact read from a store and activated (``--calibration ID``;
  the option itself: :mod:`.options`);
* :mod:`.gap` - how much of the sim-to-real gap a calibration closes on the stand-in robot.
"""
