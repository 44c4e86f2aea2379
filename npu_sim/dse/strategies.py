"""Search strategies: which designs (one index per axis) to evaluate, in batches.

A strategy is asked for a batch, the runner evaluates it (in parallel) and tells the
aggregated rows back. Grid and random hand out everything at once; NSGA-II (Optuna) asks
one population at a time and learns from the results. All are deterministic for a seed, so
a resumed sweep asks the same designs again and finds them in the results file.
"""
from __future__ import annotations

import random
import warnings

from .pareto import meets
from .sweep import Sweep


class Grid:
    def __init__(self, sweep: Sweep):
        self.designs = list(sweep.grid())
        self.total = len(self.designs)

    def ask(self):
        designs, self.designs = self.designs, None
        return designs

    def tell(self, designs, rows):
        pass


class Random(Grid):
    """`budget` distinct grid points drawn with the seed (the whole grid if it is smaller)."""

    def __init__(self, sweep: Sweep):
        n = min(sweep.budget, sweep.grid_size)
        picks = random.Random(sweep.seed).sample(range(sweep.grid_size), n)
        self.designs = [sweep.design(i) for i in picks]
        self.total = n


class NSGA2:
    """Optuna's NSGA-II over axis indices, with the sweep's constraints as constrained domination.

    Infeasible designs are told as failed trials, so they never become parents. A design asked
    twice is evaluated once (the runner's cache), but still counts against the budget.
    """

    def __init__(self, sweep: Sweep):
        import optuna
        from optuna.distributions import IntDistribution
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.sweep, self.total, self.asked = sweep, sweep.budget, 0
        self.names = list(sweep.objectives)
        # Ordered values: integer indices let crossover and mutation use neighbourhoods.
        self.dists = {a.name: IntDistribution(0, len(a.values) - 1) for a in sweep.axes}
        sampler = optuna.samplers.NSGAIISampler(population_size=sweep.population, seed=sweep.seed)
        directions = ["minimize" if s == "min" else "maximize" for s in sweep.objectives.values()]
        self.study = optuna.create_study(directions=directions, sampler=sampler)
        self.trials = []

    def ask(self):
        n = min(self.sweep.population, self.total - self.asked)
        if n <= 0:
            return None
        self.asked += n
        self.trials = [self.study.ask(self.dists) for _ in range(n)]
        return [tuple(t.params[a.name] for a in self.sweep.axes) for t in self.trials]

    def tell(self, designs, rows):
        from optuna.trial import TrialState
        for trial, row in zip(self.trials, rows):
            values = [row.get(m) for m in self.names]
            if not meets(row, []) or any(v is None for v in values):
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            for i, c in enumerate(self.sweep.constraints):  # <= 0 is met (Optuna >= 5)
                trial.set_constraint(f"c{i}", c.violation(row))
            self.study.tell(trial, values)


def make_strategy(sweep: Sweep):
    return {"grid": Grid, "random": Random, "nsga2": NSGA2}[sweep.strategy](sweep)
