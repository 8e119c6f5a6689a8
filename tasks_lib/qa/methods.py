"""Reasoning methods for multiple-choice QA agents (MedAgentsBench). An agent = (model, method).

Every method is a function ``(item, model, complete, ctx) -> MethodResult`` registered in
:data:`METHODS`; they differ only in how they prompt and aggregate. All calls go through a
:class:`~tasks_lib.llm.CompletionFn`, so usage is counted the same way for each. Calls that do not
depend on each other (cot_sc's samples, medprompt's generations, one round of a panel) are asked
concurrently with :func:`tasks_lib.llm_scope.gather`; dependent calls (self-refine rounds) stay
in order.

**The paper's names follow the paper call for call** (``../shared/specs/medagentsbench-methods.md``,
repository state c5bf425): its prompts, options rendered ``(A) x (B) y …``, temperature 0 and seed
42 sent with every call of a non-reasoning model (a call parameter, so part of the cache key; no
seed for Claude, neither for reasoning models; for both the system text is folded into the user
message, close to the paper's wording for them),
and after each call the answer extractor of ``ctx.extractor`` (the paper's JSON-schema model call
by default, counted in ``calls`` and tokens with its ``extractor_*`` share; ``regex``: no call).
Calls per item, model + extractor: zero_shot, few_shot, cot 1 + 1; cot_sc 6 + 6; multi_persona
7 + 7; self_refine 2 + 4 (first review accepts) … 7 + 8 (three rejections); medprompt 6 + 4.

**Our improvements are separately named variants** (:mod:`tasks_lib.qa.method_variants`; the
methods as medflows first had them, unchanged, regex-extracted, no extractor call): ``cot_sc_vote``
(5 sampled CoT calls at ``ctx.sample_temperature``, programmatic majority), ``multi_persona_panel``
(3 personas, 2 rounds seeing each other's full replies, a moderator; 7 calls),
``self_refine_stable`` (feedback → refine up to 3 rounds, stopping when the answer is stable; 3–7
calls) and ``medprompt_shuffle`` (3 CoT calls over seeded option shuffles, letters mapped back,
majority; 3 calls).
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from tasks_lib.llm import CompletionFn
from tasks_lib.llm_scope import gather

# The paper's multi-agent methods register themselves in METHODS when imported: importing them
# here makes this module the one place that registers every method (import METHODS from here).
from tasks_lib.qa import mdagents, medagents, method_variants  # noqa: F401
from tasks_lib.qa.method_base import METHODS as METHODS
from tasks_lib.qa.method_base import CallTally, MethodContext, MethodResult
from tasks_lib.qa.method_base import format_item as format_item
from tasks_lib.qa.method_base import majority as majority
from tasks_lib.qa.types import Exemplar, PublicQAItem


def paper_options(options: Mapping[str, str]) -> str:
    """The paper's rendering of the options: ``(A) x (B) y …``."""
    return " ".join(f"({k}) {v}" for k, v in options.items())


R = TypeVar("R")


def _concurrently(chains: Sequence[Callable[[], R]]) -> list[R]:
    """Independent call chains (a call and its extraction), concurrently, results in order."""
    return gather(list(chains))


KNOWLEDGEABLE = ("You are a knowledgeable medical assistant. Provide accurate answers to the "
                 "medical question based on the given information.")
FEW_SHOT_SYSTEM = (f"{KNOWLEDGEABLE} The following are multiple choice questions (with answers) "
                   "about medical knowledge.")
COT_SYSTEM = ("You are a helpful medical expert. Your task is to answer multi-choice medical "
              "questions by thinking step-by-step and providing clear explanations.")
ENSEMBLE_SYSTEM = ("You are a helpful medical expert. Your task is to answer a multi-choice "
                   "medical question. ")


def zero_shot_prompt(item: PublicQAItem) -> str:
    """The paper's zero-shot user message."""
    return ("Given the following question and options, select the correct answer by returning "
            "only the answer index (e.g., 'A', 'B', 'C', or 'D').\n\n"
            f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n\n"
            "Reply with the answer index only.")


def cot_prompt(item: PublicQAItem) -> str:
    """The paper's CoT user message (also CoT-SC's samples)."""
    return ("Please answer this medical question by first thinking step-by-step and then choosing "
            "from the provided options. Your responses will be used for research purposes only, "
            "so please have a definite answer (e.g., 'A', 'B', 'C', etc.).\n\n"
            f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n\n")


def few_shot_prompt(item: PublicQAItem, exemplars: Sequence[Exemplar]) -> str:
    """The paper's few-shot user message: the first 5 exemplars as ``Question: …\\nOptions:
    {dict repr}\\nAnswer: <answer text>``, then the question."""
    shots = "\n\n".join(
        f"Question: {e.question}\nOptions: {dict(e.options)}\n"
        f"Answer: {e.options.get(e.answer_idx, e.answer_idx)}" for e in exemplars[:5])
    return (f"Here are some examples:\n{shots}\n\nQuestion:\n{item.question}\n\n"
            f"Options:\n{paper_options(item.options)}\n\n")


@METHODS.register("zero_shot")
def zero_shot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
              ) -> MethodResult:
    """The paper's zero-shot: one call, then the extractor (1 + 1)."""
    t = CallTally(model, complete)
    raw = t.say(zero_shot_prompt(item), KNOWLEDGEABLE)
    return t.finish(t.extract(raw, item.options, ctx), raw)


@METHODS.register("few_shot")
def few_shot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
             ) -> MethodResult:
    """The paper's few-shot: the first 5 train exemplars with their answer texts, one call, then
    the extractor (1 + 1)."""
    t = CallTally(model, complete)
    raw = t.say(few_shot_prompt(item, ctx.exemplars), FEW_SHOT_SYSTEM)
    return t.finish(t.extract(raw, item.options, ctx), raw)


@METHODS.register("cot")
def cot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
        ) -> MethodResult:
    """The paper's CoT: one step-by-step call, then the extractor asked for ``thinking`` and
    ``answer_idx`` (1 + 1)."""
    t = CallTally(model, complete)
    raw = t.say(cot_prompt(item), COT_SYSTEM)
    return t.finish(t.extract(raw, item.options, ctx, thinking=True), raw)


@METHODS.register("cot_sc")
def cot_sc(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
           ) -> MethodResult:
    """The paper's ``cot_sc-5``: ``ctx.samples`` (5) CoT calls, each extracted (concurrently; at
    temperature 0 and seed 42 they are nearly identical), then one model "ensemble" call shown
    only the extracted letters and asked for the most frequent, then the extractor (6 + 6)."""
    t = CallTally(model, complete)
    prompt = cot_prompt(item)

    def sample() -> str | None:
        return t.extract(t.say(prompt, COT_SYSTEM), item.options, ctx).answer

    letters = _concurrently([sample] * ctx.samples)
    solutions = "\n".join(f"Solution {i + 1}:\n{v}" for i, v in enumerate(letters))
    raw = t.say(
        "Given the question described as follows:\n"
        f"Question: {item.question}\nOptions: {paper_options(item.options)}\n\n"
        "Several solutions have been generated to address the given question. They are as "
        f"follows:\n{solutions}\n\nCarefully evaluate these solutions and identify the answer "
        "that appears most frequently across them. This consistency in answers is crucial for "
        "determining the most reliable solution.\nProvide a detailed explanation of your thought "
        "process, and output only the single letter ID (A, B, C, etc.) corresponding to the most "
        "consistent solution.", ENSEMBLE_SYSTEM)
    return t.finish(t.extract(raw, item.options, ctx), raw,
                    {"samples": ",".join(str(v) for v in letters)})


PERSONA_ROLES = ("Innovative Medical Thinker - MD", "Critical Medical Analyst - Medical Professor",
                 "Clinical Decision Specialist - Medical Researcher")
"""The paper's three debate roles (``multipersona-2``)."""


def _debate_initial(role: str, item: PublicQAItem) -> str:
    return (f"You are a {role}. Based on your medical expertise, please analyze the following "
            "question and options. Think step-by-step and provide your reasoning and answer "
            "clearly. Please include distinct sections for your thinking and your answer (e.g. "
            "'A', 'B', 'C', etc.) in your response.\n\n"
            f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n")


def _debate(role: str, context: str, item: PublicQAItem) -> str:
    return (f"You are a {role}. Considering the following insights from your peers:\n{context}\n\n"
            "Please update your analysis for the question below. Think carefully step-by-step and "
            "revise your answer accordingly. Provide your response with clear sections for your "
            "updated thinking and updated answer (e.g. 'A', 'B', 'C', etc.).\n\n"
            f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n")


def _final_decision(thinking: str, answers: str, item: PublicQAItem) -> str:
    return ("You are a senior medical expert. Considering all the following debate insights and "
            f"answers:\n\n{thinking}\n\n{answers}\n\nPlease carefully review all the information "
            "and provide the final decision. Offer a detailed rationale and clearly state your "
            "final answer, indicating your final reasoning and the chosen option (e.g. 'A', 'B', "
            "'C', etc.). Note: the final answer should be a single letter corresponding to one of "
            f"the options.\n\nQuestion:\n{item.question}\n\n"
            f"Options:\n{paper_options(item.options)}\n")


@METHODS.register("multi_persona")
def multi_persona(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
                  ) -> MethodResult:
    """The paper's ``multipersona-2``: the 3 :data:`PERSONA_ROLES` answer independently (round 1,
    concurrently), each revises seeing the *other two* roles' round-1 thinking as the extractor
    read it (round 2, concurrently), then a senior medical expert decides from every role's final
    thinking and answer; every call (user message only) is followed by the extractor asked for
    ``thinking`` and ``answer_idx`` (7 + 7). With the regex extractor the thinking is the reply."""
    t = CallTally(model, complete)

    def turn(prompt: str) -> tuple[str, str | None]:
        raw = t.say(prompt)
        found = t.extract(raw, item.options, ctx, thinking=True)
        return (found.thinking if found.thinking is not None else raw), found.answer

    first = _concurrently([functools.partial(turn, _debate_initial(r, item))
                           for r in PERSONA_ROLES])
    second = _concurrently([functools.partial(turn, _debate(role, "\n".join(
        f"{other}'s previous thinking: {first[j][0]}"
        for j, other in enumerate(PERSONA_ROLES) if j != i), item))
        for i, role in enumerate(PERSONA_ROLES)])
    raw = t.say(_final_decision(
        "\n".join(f"{r}'s final thinking: {th}" for r, (th, _) in zip(PERSONA_ROLES, second,
                                                                        strict=True)),
        "\n".join(f"{r}'s final answer: {a}" for r, (_, a) in zip(PERSONA_ROLES, second,
                                                                    strict=True)), item))
    found = t.extract(raw, item.options, ctx, thinking=True)
    return t.finish(found, raw, {"rounds": "|".join(",".join(str(a) for _, a in rnd)
                                                    for rnd in (first, second))})


def _refine_generate(item: PublicQAItem) -> str:
    return (f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n\n"
            "Please reason step by step and provide your final answer (e.g., 'A', 'B', 'C', etc.).")


def _refine_review(problem: str, solution: str) -> str:
    return ("Given the following problem and solution, please critically evaluate the solution's "
            f"correctness.\n\nProblem:\n{problem}\n\nSolution:\n{solution}\n\nPlease reason step "
            "by step. If you are more than 95 percent confident that the solution is incorrect, "
            "return False and provide feedback on the error. Otherwise, return True and explain "
            "why the solution is correct.")


def _refine_revise(problem: str, solution: str, feedback: str) -> str:
    return ("Given the following problem, the original solution, and the feedback, please revise "
            f"the solution to ensure correctness.\n\nProblem:\n{problem}\n\nOriginal Solution:\n"
            f"{solution}\n\nFeedback:\n{feedback}\n\nPlease provide the revised solution (e.g., "
            "'A', 'B', 'C', etc.), after reasoning step by step.")


@METHODS.register("self_refine")
def self_refine(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
                rounds: int = 3) -> MethodResult:
    """The paper's ``self_refine-3`` (c5bf425): generate (extracted), then up to ``rounds`` ×
    [review with the 95 %-confidence prompt → the extractor reads its True/False and feedback →
    True: extract the solution and stop; False: revise, extract the revision]; the final answer is
    extracted from the last solution. As in the paper the review and revision prompts show the
    question without its options. Calls: 2 + 4 when the first review accepts; 1 + 2k model and
    2 + 2k extractor calls after k rejections (7 + 8 at most); a verdict the extractor cannot read
    counts as False (the paper's ``if review_result``)."""
    t = CallTally(model, complete)
    solution = t.say(_refine_generate(item))
    t.extract(solution, item.options, ctx)
    verdicts: list[str] = []
    for _ in range(rounds):
        review = t.review(t.say(_refine_review(item.question, solution)), ctx)
        verdicts.append(str(review.ok))
        if not review.ok:
            solution = t.say(_refine_revise(item.question, solution, review.explanation))
        t.extract(solution, item.options, ctx)
        if review.ok:
            break
    return t.finish(t.extract(solution, item.options, ctx), solution,
                    {"reviews": ",".join(verdicts)})


def _medprompt_generate(item: PublicQAItem) -> str:
    return (f"Question:\n{item.question}\n\nOptions:\n{paper_options(item.options)}\n\n"
            "Please reason step by step and provide your final answer without any additional "
            "text.")


def _medprompt_vote(question: str, shown: Sequence[str]) -> str:
    solutions = "".join(f"{i}: \n{sol}\n\n" for i, sol in enumerate(shown))
    return (f"You are given a problem:\n{question}\n\nBelow are multiple candidate solutions "
            f"generated for the problem:\n{solutions}\n\nAnalyze these solutions and decide on the "
            "best final answer by returning only the chosen option number from the following "
            f"options: {', '.join(str(i) for i in range(len(shown)))}.")


@METHODS.register("medprompt")
def medprompt(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
              generations: int = 3, votes: int = 3) -> MethodResult:
    """The paper's ``medprompt-3``: ``generations`` CoT calls (concurrently; no kNN few-shot, no
    option shuffling), then ``votes`` ensemble calls (concurrently), each showing the candidate
    solutions in a shuffled order and asking for a solution index, read by the extractor over
    the index enum; ``Counter.most_common`` over the picks (mapped back with the paper's
    ``solutions.index``, so identical solutions count as the first), and the final letter is
    extracted from the chosen solution (6 + 4). The paper's shuffles were unseeded; ours draw from
    ``random.Random`` seeded by ``ctx.seed``, the dataset and the item."""
    t = CallTally(model, complete)
    prompt = _medprompt_generate(item)
    solutions = _concurrently([functools.partial(t.say, prompt)] * generations)
    rng = random.Random(f"medprompt:{ctx.seed}:{item.dataset}:{item.realidx}")
    orders = []
    for _ in range(votes):
        shown = solutions[:]
        rng.shuffle(shown)
        orders.append(shown)

    def vote(shown: list[str]) -> int | None:
        raw = t.say(_medprompt_vote(item.question, shown))
        pick = t.extract(raw, {str(i): s for i, s in enumerate(shown)}, ctx).answer
        return None if pick is None else solutions.index(shown[int(pick)])

    picks = _concurrently([functools.partial(vote, shown) for shown in orders])
    counted = Counter(p for p in picks if p is not None)
    chosen = counted.most_common(1)[0][0] if counted else 0
    final = solutions[chosen]
    return t.finish(t.extract(final, item.options, ctx), final,
                    {"picks": ",".join(str(p) for p in picks), "chosen": str(chosen)})
