"""End-to-end runs that join the layers below: a synthesis run (experts -> sign-off -> dataset
artifact) and an evaluation run (suite -> rollouts, in-process or over ROS -> report artifact).

What ``clawgym synth`` / ``clawgym eval`` and the synthesis / evaluator nodes call. Above
evaluation, report and ros_io in the layer order (test/test_boundaries.py); pure except the
ROS mode, which is imported lazily.
"""
