"""Jobs that depend on jobs, tags and uniqueness while active: turning enqueue options into
the fields of a :class:`durq.model.NewJob`, and what a child reads of its parents.

docs/features/dependencies.md, docs/features/tags.md, docs/features/uniqueness.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from durq.checks import _check_name
from durq.codecs import Codec, decode_with
from durq.errors import ConfigError, PayloadError
from durq.model import NewJob, Parent, ParentResult
from durq.model.dependencies import CANCEL, ON_PARENT_FAILURE


class WorkflowOptions(Protocol):
    """What :func:`workflow_fields` reads of :class:`durq.task.EnqueueOptions` (a protocol,
    so that this module does not import the task module, which imports the context)."""

    @property
    def after(self) -> Sequence[Any]: ...
    @property
    def on_parent_failure(self) -> str | None: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def unique(self) -> str | None: ...
    @property
    def key(self) -> str | None: ...
    @property
    def park(self) -> bool: ...


class FairTask(Protocol):
    """What :func:`with_workflow` reads of a :class:`durq.Task`."""

    @property
    def name(self) -> str: ...
    @property
    def fair_key(self) -> Callable[[dict[str, Any]], str] | None: ...


#: At most this many tags per job, each 1 to MAX_TAG characters.
MAX_TAGS = 50
MAX_TAG = 200


def parent_of(ref: Any, on_failure: str, index_of: Mapping[int, int] | None = None) -> Parent:
    """One ``after=`` entry as a :class:`Parent`: a job id (int > 0), a :class:`durq.Job`
    (anything with an int ``id``), or, inside a graph, an earlier signature (by identity,
    through ``index_of``).

    Raises:
        ConfigError: not an id, Job or earlier signature of the same graph.
    """
    if index_of is not None and id(ref) in index_of:
        return Parent(index=index_of[id(ref)], on_failure=on_failure)
    job_id = ref if isinstance(ref, int) and not isinstance(ref, bool) else getattr(ref, "id", None)
    if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id < 1:
        raise ConfigError(
            f"after= takes job ids, Jobs or (in a graph) earlier signatures, not {ref!r}"
        )
    return Parent(id=job_id, on_failure=on_failure)


def check_on_parent_failure(value: str | None) -> str:
    """``on_parent_failure`` checked, ``cancel`` for None.

    Raises:
        ConfigError: not ``cancel`` or ``run``.
    """
    if value is None:
        return CANCEL
    if value not in ON_PARENT_FAILURE:
        raise ConfigError(f"on_parent_failure must be one of {ON_PARENT_FAILURE}, not {value!r}")
    return value


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags checked: at most :data:`MAX_TAGS` str of 1 to :data:`MAX_TAG` characters,
    duplicates dropped, order kept.

    Raises:
        ConfigError: a tag that is not a non-empty str, too long, or too many tags.
    """
    out = tuple(dict.fromkeys(_check_name("tag", t, MAX_TAG) for t in tags))
    if len(out) > MAX_TAGS:
        raise ConfigError(f"at most {MAX_TAGS} tags per job, not {len(out)}")
    return out


def check_unique(unique: str | None, key: str | None) -> float | bool | None:
    """Parse ``unique``: False for None (the key, if any, is an idempotency key held until
    the row is pruned), None for ``"active"``, the seconds N for ``"period:N"``.

    Raises:
        ConfigError: an unknown mode, a period that is not a positive number of seconds,
            or a mode without ``key=``.
    """
    if unique is None:
        return False
    if key is None:
        raise ConfigError(f"unique={unique!r} needs key=: it says how long the key is held")
    if unique == "active":
        return None
    if isinstance(unique, str) and unique.startswith("period:"):
        try:
            seconds = float(unique.removeprefix("period:"))
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise ConfigError(f"unique must be 'active' or 'period:N' (N seconds > 0), not {unique!r}")


def workflow_fields(opts: WorkflowOptions) -> dict[str, Any]:
    """The checked ``after`` / ``tags`` / ``unique`` options of one enqueue, as fields of
    :class:`NewJob` (empty when none is given).

    Raises:
        ConfigError: a bad parent, tag, unique mode or on_parent_failure; ``park=True``
            together with ``after`` (a parked child would never be released).
    """
    out: dict[str, Any] = {}
    for what, value in (("after", opts.after), ("tags", opts.tags)):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ConfigError(f"{what}= takes a list, not {value!r}")
    if opts.after:
        on_failure = check_on_parent_failure(opts.on_parent_failure)
        if opts.park:
            raise ConfigError("a job cannot be both parked and waiting for parents (after=)")
        out["parents"] = tuple(parent_of(ref, on_failure) for ref in opts.after)
    elif opts.on_parent_failure is not None:
        check_on_parent_failure(opts.on_parent_failure)
    if opts.tags:
        out["tags"] = check_tags(opts.tags)
    mode = check_unique(opts.unique, opts.key)
    if mode is not False:
        out["unique_key"] = opts.key
        out["unique_period"] = mode
    return out


def with_workflow(
    new: NewJob, template: NewJob, task: FairTask | None, payload: Mapping[str, Any]
) -> NewJob:
    """``new`` (a job with its payload) with the template's workflow fields, the unique key
    in place of the idempotency key, and the task's ``fair_key(payload)``.

    Raises:
        PayloadError: ``fair_key`` raised on this payload (the exception is chained).
        ConfigError: ``fair_key`` did not return a non-empty str of at most 200 characters
            of valid Unicode text without a NUL character (what both backends store and
            index).
    """
    fair = None
    if task is not None and task.fair_key is not None:
        try:
            fair = task.fair_key(dict(payload))
        except Exception as exc:  # as concurrency_key's: say whose call failed on what
            raise PayloadError(
                f"fair_key of {task.name} failed on the payload: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(fair, str) or not fair:
            raise ConfigError(f"{task.name}: fair_key returned {fair!r}, not a non-empty str")
        _check_name(f"{task.name}: fair_key returned a key that", fair)
    unique = template.unique_key is not None
    return replace(
        new,
        key=None if unique else new.key,
        parents=template.parents,
        tags=template.tags,
        unique_key=new.key if unique else None,
        unique_period=template.unique_period,
        fair_key=fair,
    )


class ParentResults(Mapping[int | str, Any]):
    """The results of a job's parents (``durq.context().parent_results()``).

    Index by parent job id (``results[42]``) or by task name (``results["fetch"]``: the
    result of the one parent of that task; ``KeyError`` when it has none, ``ConfigError``
    when several parents run that task — use :meth:`of_task`). Iterating yields the parent
    ids in id order. A parent that did not succeed (``on_parent_failure="run"``) has the
    result None; :meth:`state` says how it ended.
    """

    def __init__(self, parents: Sequence[ParentResult], codec: Codec | None = None) -> None:
        self._parents = {p.id: p for p in parents}
        self._codec = codec

    def _value(self, p: ParentResult) -> Any:
        return None if p.result is None else json.loads(decode_with(self._codec, p.result))

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            found = self.of_task(key)
            if not found:
                raise KeyError(key)
            if len(found) > 1:
                raise ConfigError(f"{len(found)} parents run {key!r}; use of_task({key!r})")
            return found[0]
        return self._value(self._parents[key])

    def __iter__(self) -> Iterator[int | str]:
        return iter(sorted(self._parents))

    def __len__(self) -> int:
        return len(self._parents)

    def of_task(self, task: str) -> list[Any]:
        """The results of the parents that run ``task``, in parent id order."""
        return [self._value(p) for i, p in sorted(self._parents.items()) if p.task == task]

    def state(self, job_id: int) -> str:
        """How parent ``job_id`` ended (``succeeded``, ``failed``, ...)."""
        return self._parents[job_id].state
