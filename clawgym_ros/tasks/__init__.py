"""Tasks: task specs (stages, skills, grammar, templates), stage trackers, task envs and the
planner-driven experts that synthesize demonstrations.

Every task registers once in :mod:`clawgym_ros.tasks.registry` (a built-in row, the
``@register_task`` decorator, or an entry point of the group ``clawgym_ros.tasks``);
``registry.get_task(name)`` gives its :class:`~clawgym_ros.tasks.base.Task`. See
docs/extending.md ("Add a task"), docs/notes/tasks_api.md for the framework and
docs/notes/tasks.md for the tasks.
"""
