"""The paired MedBench report of two runs (``medflows report medbench --pair BASE AGENT``).

MedBench v4 builds its agents on the backbones of the LLM track so that vanilla chat and agentic
orchestration can be compared pairwise (spec §2.3; the paper reports agents 79.8 against base
models 54.1 overall, §10). This report compares any two scored runs on the same items: per
dimension and overall, the base run's score, the agent run's, the difference (agent − base), a
paired bootstrap 95 % interval of that difference and the paired test's p value, with Holm over
the dimensions. It reads the ledger and the stored cards only (never re-scores, no judge call).

* **Sides.** BASE and AGENT are run ids, or agent ids: an agent id is its newest scored run
  (ledger ``created_at``, then replicate) on the pool ``--pool`` names. A run whose score card
  is invalid (``standing``: refused upload, error, no task score) is refused: it is credited
  with no value; a partial run or a run on an audit-flagged pool is compared with a warning.
* **Items.** Items are paired by evaluation item id on the tasks both runs' pool versions have
  in the same dimension: runs on different pools are refused, two versions of one pool are
  paired on their common items, and the items only one version has are listed
  (``only_in_base`` / ``only_in_agent``). An item one run left unanswered stays in (it scores
  the metric's missing value, as scoring does) and is listed (``only_base_answered`` /
  ``only_agent_answered``) and counted per dimension.
* **Statistic.** Each side's dimension score and overall are recomputed from the cards'
  per-item values exactly as scoring does (:mod:`tasks_lib.medbench.report_stats`: task = 100 ×
  the mean of its metrics, micro-F1 from summed TP/FP/FN, dimension = mean of its tasks, overall
  = mean of the dimensions); on the full pool this is each card's own number.
* **Resampling** (:func:`evaluators.significance.stratified_bootstrap`, the board's): the unit
  is the *base question*, the option shuffles ``<base>#s<k>`` of one question resampled
  together (they are one question asked k ways, not k independent items), within each task
  (the strata). A task whose questions have unequal numbers of common shuffles is resampled by
  evaluation item (noted). Both sides are evaluated on the same resamples; the percentile
  interval of the agent − base replicates is the CI and their two-sided p
  (:func:`~evaluators.significance.bootstrap_p_value`) is the test's: the same paired bootstrap
  the leaderboard uses between adjacent MedBench agents. Holm over the dimension tests; overall
  is tested on its own (the primary comparison) and is not in the family.
* **Backbone.** Each side's backbone is the model string of the agent its run record names
  (the catalog entry as it ran), provider prefix dropped (``openai/gpt-4o-mini`` =
  ``gpt-4o-mini``); ``upload`` and ``scripted`` name none. Different backbones: a warning and
  ``backbone_match: false``; an unknown one: ``null``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from evaluators.core import Track
from evaluators.significance import (
    BOOTSTRAP_TEST,
    DEFAULT,
    IndexStatistic,
    SignificanceSettings,
    bootstrap_p_value,
    holm,
    stratified_bootstrap,
)
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow
from tasks_lib.medbench.items import base_id
from tasks_lib.medbench.report_stats import AgentItems, TaskItems, stored_items
from tasks_lib.records import RUN_JSON, read_card, read_run, run_store
from tasks_lib.report.board import Scored, scored_runs, standings
from tasks_lib.scoring import pool_version

NO_BACKBONE = frozenset({"", "upload", "scripted"})
"""Model strings that name no backbone (uploaded answers, scripted agents)."""
Role = Literal["base", "agent"]


class PairSide(Frozen):
    """One side of the comparison."""

    given: str = Field(description="What was named (a run id or an agent id).")
    resolved: str = Field(description="'run id', or 'newest scored run of the agent on the "
                                      "pool'.")
    run_id: str = Field(description="The run compared.")
    agent_id: str = Field(description="Its agent.")
    model: str = Field(description="The agent's model string (run record).")
    backbone: str | None = Field(description="Backbone model (provider prefix dropped; None: "
                                             "the run names none).")
    status: str = Field(description="Run status.")
    pool_id: str = Field(description="Pool id.")
    pool_version: int = Field(description="Pool version the run used.")
    evaluator_version: str = Field(description="Evaluator version of its score card.")
    overall: float | None = Field(description="Its card's overall (all its items).")
    ranked: bool = Field(description="The one rule would rank it (False: see note).")
    note: str | None = Field(default=None, description="Why it would not be ranked.")


class PairRow(Frozen):
    """The comparison on one dimension, or overall."""

    scope: str = Field(description="'overall' or the dimension code.")
    tasks: list[str] = Field(description="The paired tasks in scope.")
    n_items: int = Field(description="Paired evaluation items (shuffles counted).")
    n_questions: int = Field(description="Resampled units: base questions (shuffles of one "
                                         "question together).")
    base: float = Field(description="BASE's score on the paired items (0–100).")
    agent: float = Field(description="AGENT's score on the paired items (0–100).")
    difference: float = Field(description="agent − base.")
    ci_low: float | None = Field(description="Lower end of the paired bootstrap percentile "
                                             "interval of the difference (None: reason).")
    ci_high: float | None = Field(description="Upper end (None: reason).")
    test: str | None = Field(description="paired-bootstrap (None: no test).")
    p_value: float | None = Field(description="Two-sided p of 'no difference' (None: reason).")
    p_adjusted: float | None = Field(description="Holm over the dimensions (overall: None, not "
                                                 "in the family).")
    significant: bool | None = Field(description="Holm rejects at α (overall: p < α).")
    reason: str | None = Field(description="Why there is no interval and no test.")
    both_answered: int = Field(description="Paired items both runs answered.")
    only_base_answered: int = Field(description="Paired items only BASE answered.")
    only_agent_answered: int = Field(description="Paired items only AGENT answered.")
    neither_answered: int = Field(description="Paired items neither answered.")


class MedBenchPair(Frozen):
    """The paired report of two runs."""

    pool_id: str = Field(description="The pool both runs used.")
    base: PairSide = Field(description="The base run (vanilla chat).")
    agent: PairSide = Field(description="The agent run.")
    backbone_match: bool | None = Field(description="Same backbone (None: a side names none).")
    overall: PairRow = Field(description="Overall = mean of the paired dimensions.")
    dimensions: list[PairRow] = Field(description="Per dimension, by code.")
    n_paired_items: int = Field(description="Items both runs have.")
    only_in_base: list[str] = Field(description="Items only BASE's pool version has (not "
                                                "paired).")
    only_in_agent: list[str] = Field(description="Items only AGENT's pool version has.")
    only_base_answered: list[str] = Field(description="Paired items only BASE answered.")
    only_agent_answered: list[str] = Field(description="Paired items only AGENT answered.")
    warnings: list[str] = Field(description="Different backbones, unranked runs, versions.")
    notes: list[str] = Field(description="How tasks were resampled where not by question.")
    statistics: SignificanceSettings = Field(description="Resamples, seed, level, α.")


class _Side(NamedTuple):
    scored: Scored
    side: PairSide
    items: AgentItems
    answered: dict[str, bool]


class _Task(NamedTuple):
    """One task both sides have, restricted to their common items."""

    task_id: str
    dimension: str
    base: TaskItems
    agent: TaskItems
    table: np.ndarray
    """Item positions per resampled unit: shape (units, items per unit)."""


def backbone(model: str) -> str | None:
    """The backbone a model string names (provider prefix dropped), None for none."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    return None if name in NO_BACKBONE else name


def _newest(rows: list[Scored]) -> Scored:
    return max(rows, key=lambda s: (s.run.created_at, s.run.replicate, s.run.run_id))


def _scored(role: Role, name: str, pool: str | None, evaluator_version: str | None
            ) -> tuple[Scored, str]:
    """The scored run ``name`` names (a run id, or an agent id on ``pool``) and how."""
    rows: list[RunRow] = store.runs(run_id=name)
    resolved = "run id"
    if not rows:
        if not store.runs(agent_id=name):
            raise InputDataError(role, f"no run or agent {name!r} in the ledger (see: medflows "
                                       "runs list)")
        if pool is None:
            raise InputDataError(role, f"{name} is an agent id: give --pool POOL to pair its "
                                       "newest scored run there, or give a run id")
        found = pool_version(pool)
        rows = store.runs(agent_id=name, pool_id=found.pool_id, pool_version=found.version)
        if not rows:
            raise InputDataError(role, f"agent {name} has no run on {found.pool_id} "
                                       f"v{found.version} (see: medflows runs list --pool {pool})")
        resolved = "newest scored run of the agent on the pool"
    scored = scored_runs(rows, evaluator_version)
    if not scored:
        run = max(rows, key=lambda r: (r.created_at, r.replicate, r.run_id)).run_id
        version = f" by evaluator version {evaluator_version}" if evaluator_version else ""
        raise InputDataError(role, f"run {run} is not scored yet{version} (score it: medflows "
                                   f"score --run {run})")
    s = _newest(scored)
    if s.run.track != Track.MEDBENCH.value:
        raise InputDataError(role, f"run {s.run.run_id} is a {s.run.track} run, not MedBench "
                                   "(compare other tracks on medflows report --pool)")
    return s, resolved


def _side(role: Role, name: str, pool: str | None, evaluator_version: str | None) -> _Side:
    """One side: its run, its standing and its per-item values."""
    s, resolved = _scored(role, name, pool, evaluator_version)
    run_id = s.run.run_id
    where = f"{role} run {run_id}"
    mark = standings([s])[run_id]
    if not mark.credited:
        raise InputDataError(where, f"{mark.reason}: an uncredited run has no score to compare")
    if not run_store(run_id).exists(RUN_JSON):
        raise InputDataError(where, "no stored run record (runs/<run_id>/run.json)")
    record = read_run(run_id)
    if pool is not None and resolved == "run id":
        found = pool_version(pool)
        if (record.pool_id, record.pool_version) != (found.pool_id, found.version):
            raise InputDataError(where, f"ran on {record.pool_id} v{record.pool_version}, not "
                                        f"on --pool {found.pool_id} v{found.version}")
    items = stored_items(record.pool_url, [s])
    if isinstance(items, str):
        raise InputDataError(where, items)
    card = read_card(run_id, s.score.evaluator_version)
    side = PairSide(given=name, resolved=resolved, run_id=run_id, agent_id=record.agent.agent_id,
                    model=record.agent.model, backbone=backbone(record.agent.model),
                    status=record.status.value, pool_id=record.pool_id,
                    pool_version=record.pool_version,
                    evaluator_version=s.score.evaluator_version, overall=card.task_score,
                    ranked=mark.ranked, note=mark.reason)
    return _Side(s, side, items, {c.case_id: c.valid for c in card.per_case})


def _restrict(task: TaskItems, keep: tuple[str, ...]) -> TaskItems:
    """The task on the items ``keep`` only."""
    where = {item: k for k, item in enumerate(task.items)}
    pos = [where[i] for i in keep]
    return task._replace(items=keep, values=task.values[:, :, pos],
                         counts=task.counts[:, :, pos])


def _units(items: tuple[str, ...]) -> np.ndarray | None:
    """Positions of each base question's shuffles, shape (questions, shuffles); None when the
    questions have unequal numbers of shuffles."""
    groups: dict[str, list[int]] = {}
    for k, item in enumerate(items):
        groups.setdefault(base_id(item), []).append(k)
    if len({len(g) for g in groups.values()}) > 1:
        return None
    return np.array(list(groups.values()), dtype=int)


def _pair_tasks(base: AgentItems, agent: AgentItems) -> tuple[list[_Task], set[str], set[str],
                                                              list[str]]:
    """The tasks both have in the same dimension, on their common items; the items only one
    side has; notes on tasks resampled by item."""
    theirs = {t.task_id: t for t in agent.tasks}
    tasks, notes = [], []
    only_base = {i for t in base.tasks for i in t.items}
    only_agent = {i for t in agent.tasks for i in t.items}
    for mine in base.tasks:
        other = theirs.get(mine.task_id)
        if other is None or other.dimension != mine.dimension:
            continue
        common = tuple(sorted(set(mine.items) & set(other.items)))
        if not common:
            continue
        only_base -= set(common)
        only_agent -= set(common)
        table = _units(common)
        if table is None:
            notes.append(f"{mine.task_id}: its questions have unequal numbers of common "
                         "shuffles, so its evaluation items are resampled one by one")
            table = np.arange(len(common), dtype=int).reshape(-1, 1)
        tasks.append(_Task(mine.task_id, mine.dimension, _restrict(mine, common),
                           _restrict(other, common), table))
    return tasks, only_base, only_agent, notes


def _statistic(tasks: list[_Task], role: Role) -> IndexStatistic:
    """One side's score (mean of the dimensions of ``tasks``) on resampled units."""
    found = AgentItems([t.base if role == "base" else t.agent for t in tasks])

    def score(idx: list[np.ndarray]) -> np.ndarray:
        positions = [t.table[i].reshape(*i.shape[:-1], -1) for t, i in zip(tasks, idx,
                                                                            strict=True)]
        return found.overall(positions)

    return score


def _row(scope: str, tasks: list[_Task], answered: tuple[dict[str, bool], dict[str, bool]],
         settings: SignificanceSettings) -> PairRow:
    """The comparison on ``tasks`` (unadjusted)."""
    sizes = [len(t.table) for t in tasks]
    base, agent = _statistic(tasks, "base"), _statistic(tasks, "agent")
    whole = [np.arange(n) for n in sizes]
    b, a = float(base(whole)), float(agent(whole))
    drawn = stratified_bootstrap(sizes, lambda idx: agent(idx) - base(idx), settings)
    p = None if drawn.distribution is None else bootstrap_p_value(drawn.distribution)
    items = [i for t in tasks for i in t.base.items]
    got = [(answered[0].get(i, False), answered[1].get(i, False)) for i in items]
    return PairRow(scope=scope, tasks=[t.task_id for t in tasks], n_items=len(items),
                   n_questions=sum(sizes), base=b, agent=a, difference=a - b,
                   ci_low=drawn.interval.low, ci_high=drawn.interval.high,
                   test=None if p is None else BOOTSTRAP_TEST, p_value=p, p_adjusted=None,
                   significant=None if p is None else p < settings.alpha,
                   reason=drawn.interval.reason, both_answered=got.count((True, True)),
                   only_base_answered=got.count((True, False)),
                   only_agent_answered=got.count((False, True)),
                   neither_answered=got.count((False, False)))


def _warnings(base: PairSide, agent: PairSide, match: bool | None) -> list[str]:
    out = []
    if match is False:
        out.append(f"backbones differ: base {base.backbone} ({base.run_id}), agent "
                   f"{agent.backbone} ({agent.run_id}); MedBench pairs an agent with the base "
                   "model it is built on")
    elif match is None:
        out.append("backbone unknown for "
                   + ", ".join(f"{s.run_id} (model {s.model!r})" for s in (base, agent)
                               if s.backbone is None) + ": the same backbone is not checked")
    for s in (base, agent):
        if not s.ranked:
            out.append(f"{s.run_id} would not be ranked: {s.note}")
    if base.evaluator_version != agent.evaluator_version:
        out.append(f"scored by different evaluator versions: base {base.evaluator_version}, "
                   f"agent {agent.evaluator_version} (--evaluator-version V picks one)")
    if base.pool_version != agent.pool_version:
        out.append(f"different versions of {base.pool_id}: base v{base.pool_version}, agent "
                   f"v{agent.pool_version}; paired on their common items")
    return out


def build_pair(base: str, agent: str, pool: str | None = None,
               evaluator_version: str | None = None,
               settings: SignificanceSettings = DEFAULT) -> MedBenchPair:
    """The paired report of BASE against AGENT (see the module doc).

    Args:
        base: The base run: a run id, or an agent id (its newest scored run on ``pool``).
        agent: The agent run, likewise.
        pool: The pool (root URL or ``active:<subset_id>``): needed for agent ids; with run
            ids, both runs must have used it.
        evaluator_version: Compare the cards of this evaluator version (default: each run's
            newest).
        settings: Resamples, seed, level and α.
    """
    one = _side("base", base, pool, evaluator_version)
    two = _side("agent", agent, pool, evaluator_version)
    if one.side.run_id == two.side.run_id:
        raise InputDataError("agent", f"{agent} is the base run {one.side.run_id} itself")
    if one.side.pool_id != two.side.pool_id:
        raise InputDataError("agent", f"the runs used different pools: base {one.side.run_id} "
                                      f"on {one.side.pool_id}, agent {two.side.run_id} on "
                                      f"{two.side.pool_id}; pair runs on the same items")
    tasks, only_base, only_agent, notes = _pair_tasks(one.items, two.items)
    if not tasks:
        raise InputDataError("agent", f"runs {one.side.run_id} and {two.side.run_id} have no "
                                      f"common items (base v{one.side.pool_version}, agent "
                                      f"v{two.side.pool_version} of {one.side.pool_id})")
    answered = (one.answered, two.answered)
    overall = _row("overall", tasks, answered, settings)
    by_dim = sorted({t.dimension for t in tasks})
    rows = [_row(d, [t for t in tasks if t.dimension == d], answered, settings) for d in by_dim]
    adjusted = holm([r.p_value for r in rows], settings)
    rows = [r if adj is None else r.model_copy(update={"p_adjusted": adj.p_adjusted,
                                                       "significant": adj.significant})
            for r, adj in zip(rows, adjusted, strict=True)]
    items = [i for t in tasks for i in t.base.items]
    match = (None if one.side.backbone is None or two.side.backbone is None
             else one.side.backbone == two.side.backbone)
    return MedBenchPair(
        pool_id=one.side.pool_id, base=one.side, agent=two.side, backbone_match=match,
        overall=overall, dimensions=rows, n_paired_items=len(items),
        only_in_base=sorted(only_base), only_in_agent=sorted(only_agent),
        only_base_answered=[i for i in items if one.answered.get(i) and not two.answered.get(i)],
        only_agent_answered=[i for i in items if two.answered.get(i)
                             and not one.answered.get(i)],
        warnings=_warnings(one.side, two.side, match), notes=notes, statistics=settings)
