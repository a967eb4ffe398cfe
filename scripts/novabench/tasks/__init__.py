"""The task registry: one home per task (see :mod:`novabench.tasks.base`).

The three NOVA tasks register themselves here, in the order of the clinical workflow.
"""

from novabench.tasks.base import (
    AnswerContext,
    Answers,
    Metric,
    Parsed,
    ScoringContext,
    Task,
    dataset_needs,
    get_task,
    register_task,
    task_names,
    unregister_task,
)
from novabench.tasks.captioning import Captioning
from novabench.tasks.diagnosis import Diagnosis
from novabench.tasks.localization import Localization

for _task in (Localization(), Captioning(), Diagnosis()):
    register_task(_task)

__all__ = [
    "AnswerContext",
    "Answers",
    "Metric",
    "Parsed",
    "ScoringContext",
    "Task",
    "dataset_needs",
    "get_task",
    "register_task",
    "task_names",
    "unregister_task",
]
