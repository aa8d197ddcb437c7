"""The one place (with clawgym_ros.nodes) where rclpy and message packages are imported."""
