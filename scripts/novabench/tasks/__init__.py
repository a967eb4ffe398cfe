"""The task registry: one home per task (see :mod:`novabench.tasks.base`).

Nothing here imports a task: :func:`get_task` loads a built-in task's module on first use,
so importing the registry (or one task) never loads the others.
"""

from novabench.tasks.base import (
    AnswerContext,
    Answers,
    Metric,
    Parsed,
    ScoringContext,
    Task,
    builtin_task_names,
    dataset_needs,
    get_task,
    register_task,
    task_module,
    task_names,
    unregister_task,
)

__all__ = [
    "AnswerContext",
    "Answers",
    "Metric",
    "Parsed",
    "ScoringContext",
    "Task",
    "builtin_task_names",
    "dataset_needs",
    "get_task",
    "register_task",
    "task_module",
    "task_names",
    "unregister_task",
]
