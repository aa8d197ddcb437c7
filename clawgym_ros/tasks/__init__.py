"""Tasks: task specs (stages, skills, grammar, templates), stage trackers, task envs and the
planner-driven experts that synthesize demonstrations.

``registry.get_task(name)`` gives a :class:`~clawgym_ros.tasks.base.Task`; see
docs/notes/tasks_api.md for the framework and docs/notes/tasks.md for the tasks.
"""
