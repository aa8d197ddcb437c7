"""ClawGym: closed-loop synthesis, training and evaluation of claw agents on ROS 2."""

__version__ = "0.1.0"
