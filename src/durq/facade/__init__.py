"""The workflow features of the :class:`durq.Durq` facade, one plain mixin class per feature.

``Durq`` (app.py) holds the core (construction, task registry, enqueue, reading and
steering) and inherits these; each mixin holds the public methods of one feature and the
private helpers only it uses. :class:`FacadeBase` declares, for the type checker only, what
the mixins use of the core.
"""

from durq.facade.base import FacadeBase
from durq.facade.batches import BatchesFacade
from durq.facade.deadlines import DeadlinesFacade
from durq.facade.enqueue import EnqueueFacade
from durq.facade.hooks import HooksFacade
from durq.facade.limits import LimitsFacade
from durq.facade.pause import PauseFacade
from durq.facade.periodic import PeriodicFacade
from durq.facade.retention import RetentionFacade
from durq.facade.workflows import Group, WorkflowsFacade

__all__ = [
    "BatchesFacade",
    "DeadlinesFacade",
    "EnqueueFacade",
    "FacadeBase",
    "Group",
    "HooksFacade",
    "LimitsFacade",
    "PauseFacade",
    "PeriodicFacade",
    "RetentionFacade",
    "WorkflowsFacade",
]
