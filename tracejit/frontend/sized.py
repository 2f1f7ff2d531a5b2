"""The plan of a signature whose trace meets sizes that depend on the data (numpy/data_sizes.py): one plan per
tuple of counts, found or made while a call runs.

A call runs the plan of the counts last seen. Its graph reads each count back when it is computed and checks it
(frontend/staged.py); where one differs (SizeChanged), the call goes on with the plan of the counts known so far
and that one, from what it computed already: the values before the count are not computed again, and nothing is
written into the caller's arrays until the last plan has run. A plan for counts not seen yet is traced then: where
its trace meets a further size whose count it does not know, the plan is a probe that only computes that count, and
the call goes on from it the same way. The kernels of a new count are those of the last with that size an argument
of their code once it has taken two values (runtime/symbolic_sizes.py): tracing again is what another count costs.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from tracejit.errors import InternalError
from tracejit.frontend.plan import Traced
from tracejit.ir.verify import verify_graph
from tracejit.numpy import data_sizes, random_draws
from tracejit.numpy.data_sizes import SizeChanged

# how many plans (tuples of counts) one signature keeps, least recently used out
PLANS_PER_SIGNATURE = 32


class SizedPlan:
    """Plans of one signature by the counts of its data-dependent sizes (module docstring). Runs as a Plan does."""

    def __init__(self, kernel, args, device_name: str, first):
        self._kernel, self._device_name = kernel, device_name
        self._plans: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._add(first)
        self.current = first
        self.device, self.runnable = first.device, first.runnable

    # what callers read of a plan: the one run last
    @property
    def traced(self):
        return self.current.traced

    @property
    def executable(self):
        return self.current.executable

    @property
    def kernels(self):
        return self.current.kernels

    def _with_words(self, args):
        return self.current._with_words(args)

    def __call__(self, *args, out=None):
        return self.call(args, args, out)

    def run(self, args):
        return self.call(args, args)

    def timed(self, args, originals, out=None):
        return self.call(args, originals, out)

    def call(self, args, originals, out=None):
        """Run with `args` (as normalized for the plan), as Plan.call: through the plans of the counts this call has."""
        return self._through(args, lambda plan, full, seed: plan._call(full, originals, out, seed))

    def settle(self, args) -> None:
        """Run the plans of this call's counts, writing nothing back, so that the plan read after is this call's
        (f.explain). (Random words are drawn for it, as for a call.)"""
        self._through(args, lambda plan, full, seed: plan.executable(full, None, seed=seed))

    def _through(self, args, run):
        plan = self.current
        full = plan._with_words(args)
        seed = None
        for _ in range(10_000):
            try:
                result = run(plan, full, seed)
            except SizeChanged as changed:
                known = plan.traced.sizes[: changed.index] + (changed.count,)
                following = self._plan_for(known, args)
                full = _hidden(following, plan, args, full)
                plan, seed = following, changed.values
                continue
            self.current = plan
            return result
        raise InternalError(f"{self._kernel.__name__}: its data-dependent sizes kept changing while it ran")

    def _plan_for(self, known: tuple[int, ...], args):
        """The plan whose counts begin with `known` (run last first), else a new one traced with them."""
        for sizes in reversed(self._plans):
            if sizes[: len(known)] == known and (len(sizes) > len(known) or not self._plans[sizes].traced.probe):
                self._plans.move_to_end(sizes)
                return self._plans[sizes]
        probe = self._plans.get(known)
        if probe is not None:
            self._plans.move_to_end(known)
            return probe
        plan = self._kernel._sized_plan(args, self._device_name, known)
        self._add(plan)
        return plan

    def _add(self, plan) -> None:
        self._plans[plan.traced.sizes] = plan
        while len(self._plans) > PLANS_PER_SIGNATURE:
            self._plans.popitem(last=False)

    def __repr__(self) -> str:
        return f"<SizedPlan {self._kernel.__name__} on {self.device.name}: {len(self._plans)} plan(s) by count>"


def probe(name: str, stop: data_sizes.NeedsSize, infos, streams, known: tuple[int, ...], held=None) -> Traced:
    """The graph of a plan that only computes the count its trace stopped at (NeedsSize): the call reads it back
    and goes on with the plan traced with it (SizedPlan). `held`: the arrays the trace held (numpy/captured.py)."""
    outputs = [data_sizes.probe(stop.index, stop.count, stop.where)]
    verify_graph(outputs)
    traced = Traced(name, outputs, None, infos, (), 1, streams, held)
    traced.sizes, traced.probe = known, True
    return traced


def _hidden(plan, before, args, full) -> tuple:
    """The arguments and hidden values for `plan`, going on from `before`'s call with `full`: the random words
    already drawn for the streams both have (the values computed from them are kept), fresh words for new ones,
    then the values of its comparisons and the arrays it holds."""
    new, old = plan.traced, before.traced
    if new.streams == old.streams and new.compared == old.compared and not new.captured and not old.captured:
        return full
    n, words = len(args), random_draws.WORDS
    out = list(args)
    for i, s in enumerate(new.streams):
        if i < len(old.streams) and (old.streams[i].kind, old.streams[i].first) == (s.kind, s.first):
            out += full[n + i * words : n + (i + 1) * words]
        else:
            out += [np.array(w, random_draws.U32) for w in s.words(args)]
    if plan._compared is not None:
        out += plan._compared(args)
    return tuple(out) + plan.held_values()
