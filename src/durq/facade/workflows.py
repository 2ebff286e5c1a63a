"""Durq's graph methods: :meth:`enqueue_graph`, :meth:`chain` and :meth:`group` (built on
``after=``; docs/features/dependencies.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from durq.checks import _check_int
from durq.codecs import Encrypted, reseal_with
from durq.dependencies import check_on_parent_failure, parent_of
from durq.errors import ConfigError
from durq.facade.base import FacadeBase
from durq.observability import events

if TYPE_CHECKING:
    from durq.job import Job
    from durq.model import NewJob
    from durq.task import Signature


class Group:
    """Signatures to run side by side (``dq.group([...])``); :meth:`then` adds the job that
    runs once they all ended (a fan-in)."""

    def __init__(self, app: WorkflowsFacade, members: Sequence[Signature]) -> None:
        if not members:
            raise ConfigError("a group needs at least one signature")
        self.app = app
        self.members = list(members)

    def enqueue(self) -> list[Job]:
        """Enqueue the members (one transaction); no job waits for them."""
        return self.app.enqueue_graph(self.members)

    def then(self, sig: Signature, *, on_parent_failure: str | None = None) -> list[Job]:
        """Enqueue the members and ``sig`` after all of them, in one transaction. The first
        required argument ``sig`` does not give receives the list of the members' results
        (in member order); with none, ``sig`` just runs after them. Returns the members'
        jobs then ``sig``'s (last).

        Args:
            on_parent_failure: ``cancel`` (default): a member that fails cancels ``sig``;
                ``run``: ``sig`` runs once all are terminal (a failed member's result is None).
                None: ``sig``'s own ``.options(on_parent_failure=...)``, else ``cancel``.
        """
        name = sig.task.result_parameter(sig.kwargs)
        final = _own_mode_first(sig, on_parent_failure).after(
            *self.members, pass_as=name, as_list=True
        )
        return self.app.enqueue_graph([*self.members, final])


class WorkflowsFacade(FacadeBase):
    """Graphs of jobs in one transaction: chains, fan-out / fan-in, any DAG."""

    def enqueue_graph(self, signatures: Sequence[Signature]) -> list[Job]:
        """Enqueue a graph of jobs in one transaction: all of them exist, or none.

        Each signature's parents (``sig.after(...)``) are earlier signatures of the list,
        Jobs or ids, so a cycle cannot be written. A job with unfinished parents waits
        (state ``waiting``) and is queued in the transaction in which its last parent ends.

        Args:
            signatures: ``task.s(**kwargs)``, optionally ``.options(...)`` and ``.after(...)``.

        Returns:
            One :class:`Job` per signature, in order.

        Raises:
            ConfigError: a parent signature that is not earlier in the list, or any bad option.
            ParentNotFound: a parent id names no job; nothing was written.
            PayloadError: a signature's arguments do not fit its task; nothing was written.
        """
        index_of = {id(sig): i for i, sig in enumerate(signatures)}
        news: list[NewJob] = []
        for pos, sig in enumerate(signatures):
            t = self._template(sig.task.name, sig.opts, sig.task)
            on_failure = check_on_parent_failure(sig.opts.on_parent_failure)
            parents = []
            for ref in sig.parents:
                p = parent_of(ref, on_failure, index_of)
                if p.index is not None and p.index >= pos:
                    raise ConfigError(
                        f"{sig!r} waits for a signature that comes later in the graph "
                        "(parents must come first)"
                    )
                parents.append(replace(p, pass_as=sig.pass_as, pass_list=sig.pass_list))
            if parents:
                t = replace(t, parents=(*t.parents, *parents))
            news.append(self._with_payload(t, sig.kwargs, sig.opts.key, passed=sig.pass_as))
        if not news:
            return []
        connection = signatures[0].opts.connection
        inserted = self._store_for(connection).enqueue(news, connection=connection)
        log = events.enabled()
        return [self._job_after_insert(n, i, log) for n, i in zip(news, inserted, strict=True)]

    def chain(self, *steps: Signature, on_parent_failure: str | None = None) -> list[Job]:
        """Enqueue ``steps`` to run one after another, in one transaction; each step's first
        required argument that its signature does not give receives the previous step's
        result. A step that fails cancels the rest (``on_parent_failure="run"``: they run
        anyway, receiving None); a step's own ``.options(on_parent_failure=...)`` wins over
        the chain's. Returns their jobs in order.

        Raises:
            ConfigError: no steps; see :meth:`enqueue_graph` for the rest.
        """
        if not steps:
            raise ConfigError("a chain needs at least one step")
        graph: list[Signature] = [steps[0]]
        for step in steps[1:]:
            name = step.task.result_parameter(step.kwargs)
            graph.append(_own_mode_first(step, on_parent_failure).after(graph[-1], pass_as=name))
        return self.enqueue_graph(graph)

    def reencrypt(self, chunk: int = 500) -> int:
        """Rewrite every payload, result and step record at rest under the codec's active
        key (the first of ``Encrypted(keys=...)``), plain ones included, ``chunk`` rows per
        transaction. Run it after a rotation; once it returned, old keys can be dropped.
        Returns the number of rows rewritten (a row that changed meanwhile is skipped: run
        it again).

        Raises:
            ConfigError: the app has no ``durq.codecs.Encrypted`` codec.
            UndecodableValue: a value is under a key the codec does not have (earlier
                chunks stay rewritten; add the key and run it again).
        """
        codec = getattr(self, "codec", None)
        if not isinstance(codec, Encrypted):
            raise ConfigError("reencrypt() needs Durq(codec=durq.codecs.Encrypted(...))")
        _check_int("chunk", chunk, 1, 100_000)
        return self.store.reseal(codec.prefix, reseal_with(codec), chunk)

    def group(self, members: Sequence[Signature]) -> Group:
        """A :class:`Group` of signatures: ``.enqueue()`` them, or ``.then(sig)`` for a fan-in."""
        return Group(self, members)


def _own_mode_first(sig: Signature, mode: str | None) -> Signature:
    """``sig`` with ``on_parent_failure=mode`` unless it set its own (its own wins)."""
    if mode is None or sig.opts.on_parent_failure is not None:
        return sig
    return sig.options(on_parent_failure=mode)
