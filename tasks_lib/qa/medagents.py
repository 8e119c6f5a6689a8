"""MedAgents (the MedAgentsBench ``syn_verif`` run of ``baselines/MedAgents``), call for call.

1. A question-domain classifier names 5 fields (``Medical Field: A | B | C | D | E``) and an
   option-domain classifier names 2.
2. One question-analysis expert per question domain (5, concurrent), then one option-analysis
   expert per option domain (2, concurrent), each of which sees every question analysis.
3. A synthesizer writes "Key Knowledge / Total Analysis"; the report kept is the question, the
   options and the Total Analysis (the paper's cleanup drops the Key Knowledge: its test compares a
   list with a string, so it never matches).
4. Consensus, up to 3 attempts (``max_attempt_vote = 3``): all 7 domain experts vote YES/NO on the
   report (concurrently; the first "yes"/"no" substring of the lower-cased reply decides, none →
   yes); each NO expert writes revision advice (concurrently); if any voted NO, one revision call
   rewrites the report (its Total Analysis becomes the new report) and the next attempt votes on it.
5. A final call answers ``Option: X`` from the report; the letter is the paper's parse: the first
   A–E after the last ``:``. A letter that is not one of the item's options counts as no answer.

Every call has temperature 0 and a system role (the expert's, or empty as in the paper). Calls per
item: 2 + 5 + 2 + 1 + Σ_attempts(7 votes + NO advice + 1 revision if any NO) + 1, i.e. 18 when
every expert agrees at once and 56 at most (3 attempts of 7 NO votes) — with 5 and 2 domains, as
the classifiers are asked for; like the paper, a classifier reply with more or fewer ``|`` fields
gets that many experts. Options are shown as the Python dict the paper printed. No randomness.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from tasks_lib.llm import CompletionFn
from tasks_lib.qa.method_base import METHODS, CallTally, MethodContext, MethodResult
from tasks_lib.qa.types import PublicQAItem

NUM_QUESTION_DOMAINS = 5
NUM_OPTION_DOMAINS = 2
MAX_ATTEMPTS = 3
"""The paper's ``max_attempt_vote`` (the paper's text says 2; the code ran 3)."""

EXTRACTOR = "option-regex"
"""How MedAgents' answers are decided: the paper's A–E parse of ``Option: X`` (no model call)."""

QUESTION_CLASSIFIER = ("You are a medical expert who specializes in categorizing a specific "
                       "medical scenario into specific areas of medicine.")
OPTION_CLASSIFIER = ("As a medical expert, you possess the ability to discern the two most "
                     "relevant fields of expertise needed to address a multiple-choice question "
                     "encapsulating a specific medical context.")
SYNTHESIZER = ("You are a medical decision maker who excels at summarizing and synthesizing "
               "based on multiple experts from various domain experts.")
NO_ROLE = ""
"""The paper's system role of the revision and final-answer calls (an empty system message)."""


def _field_format(n: int) -> str:
    return "Medical Field: " + " | ".join(f"Field{i}" for i in range(n))


def question_analyst(domain: str) -> str:
    """System role of a question-analysis expert."""
    return (f"You are a medical expert in the domain of {domain}. From your area of "
            "specialization, you will scrutinize and diagnose the symptoms presented by patients "
            "in specific medical scenarios.")


def option_analyst(domain: str) -> str:
    """System role of an option-analysis expert."""
    return (f"You are a medical expert specialized in the {domain} domain. You are adept at "
            "comprehending the nexus between questions and choices in multiple-choice exams and "
            "determining their validity. Your task, in particular, is to analyze individual "
            "options with your expert medical knowledge and evaluate their relevancy and "
            "correctness.")


def voter(domain: str) -> str:
    """System role of a domain expert in the consensus vote (and its advice call)."""
    return f"You are a medical expert specialized in the {domain} domain."


def parse_domains(reply: str) -> list[str]:
    """The fields after the last ``Field:``, split at ``|`` (the paper's parse)."""
    return [d.strip() for d in reply.split("Field:")[-1].strip().split("|")]


def clean_analysis(text: str) -> str:
    """The paper's cleanup of an analysis: drop a trailing unfinished sentence and any text up to
    'as an AI language model'."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    if len(sentences) > 1 and not sentences[-1].endswith("."):
        text = " ".join(sentences[:-1])
    marker = "as an ai language model"
    at = text.lower().find(marker)
    if at >= 0:
        text = text[at + len(marker):].strip().strip(",").strip()
    return text


def report_of(question: str, options: str, synthesis: str) -> str:
    """The report the experts vote on: question, options and the Total Analysis."""
    parts = synthesis.split("Total Analysis:")
    analysis = (parts[1] if len(parts) > 1 else parts[0]).strip()
    return f"Question: {question} \nOptions: {options} \nTotal Analysis: {analysis} \n"


def parse_vote(reply: str) -> str:
    """'yes' or 'no': the first of them in the lower-cased reply (substrings count, as in the
    paper); 'yes' when there is neither."""
    found = re.findall(r"yes|no", reply.lower())
    return found[0] if found else "yes"


def parse_option(reply: str) -> str | None:
    """The paper's final parse: the first A–E after the last ``:`` (None if there is none)."""
    found = re.findall(r"A|B|C|D|E", reply.split(":")[-1])
    return found[0] if found else None


def _analyses_text(analyses: dict[str, str], label: str, content: str) -> str:
    colon = ":" if label == "Options" else ""
    return "".join(f"Report{i}{colon} \n{label}: {content} \nDomain: {domain} \n"
                   f"Analysis: {analysis} \n\n"
                   for i, (domain, analysis) in enumerate(analyses.items()))


def _question_prompt(question: str) -> str:
    return (f"Please meticulously examine the medical scenario outlined in this question: "
            f"'''{question}'''. Drawing upon your medical expertise, interpret the "
            "condition being depicted. Subsequently, identify and highlight the aspects of the "
            "issue that you find most alarming or noteworthy.")


def _option_prompt(question: str, options: str, analyses: dict[str, str]) -> str:
    prompt = (f"Regarding the question: '''{question}''', we procured the analysis of five "
              "experts from diverse domains. \n")
    for domain, analysis in analyses.items():  # the paper repeats the task after each analysis
        prompt += (f"The evaluation from the {domain} expert suggests: {analysis} \n"
                   f"The following are the options available: '''{options}'''. Reviewing the "
                   "question's analysis from the expert team, you're required to fathom the "
                   "connection between the options and the question from the perspective of "
                   "your respective domain, and scrutinize each option individually to assess "
                   "whether it is plausible or should be eliminated based on reason and logic. "
                   "Pay close attention to discerning the disparities among the different "
                   "options and rationalize their existence. A handful of these options might "
                   "seem right on the first glance but could potentially be misleading in "
                   "reality.")
    return prompt


def _synthesis_prompt(question_reports: str, option_reports: str) -> str:
    fmt = "Key Knowledge: [extracted key knowledge] \nTotal Analysis: [synthesized analysis] \n"
    return ("Here are some reports from different medical domain experts.\n You need to complete "
            "the following steps:1. Take careful and comprehensive consideration of the "
            "following reports.2. Extract key knowledge from the following reports. 3. Derive "
            "the comprehensive and summarized analysis based on the knowledge.4. Your ultimate "
            "goal is to derive a refined and synthesized report based on the following reports."
            f"You should output in exactly the same format as '''{fmt}'''"
            + question_reports + option_reports)


def _vote_prompt(domain: str, report: str) -> str:
    return (f"Here is a medical report: {report} \nAs a medical expert specialized in {domain}, "
            "please carefully read the report and decide whether your opinions are consistent "
            "with this report.Please respond only with: [YES or NO].")


def _advice_prompt(domain: str, report: str) -> str:
    return (f"Here is a medical report: {report} \nAs a medical expert specialized in {domain}, "
            "please make full use of your expertise to propose revisions to this report.You "
            "should output in exactly the same format as '''Revisions: [proposed revision "
            "advice] '''")


def _revision_prompt(report: str, advice: dict[str, str]) -> str:
    prompt = f"Here is the original report: {report}\n\n"
    for domain, text in advice.items():
        prompt += f"Here is advice from a medical expert specialized in {domain}: {text}.\n"
    return prompt + ("Based on the above advice, output the revised analysis in exactly the same "
                     "format as '''Total Analysis: [revised analysis] '''")


def _final_prompt(report: str) -> str:
    return (f"Here is a synthesized report: {report} \nBased on the above report, select the "
            "optimal choice to answer the question. \nPoints to note: \n1. The analyses provided "
            "should guide you towards the correct response. \n2. Any option containing "
            "incorrect information inherently cannot be the correct choice. \n3. Please respond "
            "only with the selected option's letter, like A, B, C, or D, using the following "
            "format: '''Option: [Selected Option's Letter]'''. Remember, it's the letter we "
            "need, not the full content of the option.")


def _consensus(t: CallTally, domains: Sequence[str], question: str, options: str, report: str
               ) -> tuple[str, list[list[str]]]:
    """Up to :data:`MAX_ATTEMPTS` vote → advice → revision rounds; the final report and votes."""
    history: list[list[str]] = []
    for _ in range(MAX_ATTEMPTS):
        votes = [parse_vote(v) for v in
                 t.ask_all([(voter(d), _vote_prompt(d, report), 0.0) for d in domains])]
        history.append(votes)
        dissent = [d for d, v in zip(domains, votes, strict=True) if v == "no"]
        if not dissent:
            break
        advice = dict(zip(dissent, t.ask_all(
            [(voter(d), _advice_prompt(d, report), 0.0) for d in dissent]), strict=True))
        report = report_of(question, options, t.ask(NO_ROLE, _revision_prompt(report, advice)))
    return report, history


@METHODS.register("medagents")
def medagents(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
              ) -> MethodResult:
    """MedAgents as the paper ran it (``syn_verif``); see the module docstring."""
    t = CallTally(model, complete)
    question = item.question if item.question[-1:] in string.punctuation else item.question + "?"
    options = str(dict(item.options))
    q_domains = parse_domains(t.ask(QUESTION_CLASSIFIER, (
        "You need to complete the following steps:1. Carefully read the medical scenario "
        f"presented in the question: '''{question}'''. \n2. Based on the medical scenario in it, "
        "classify the question into five different subfields of medicine. \n3. You should only "
        f"output in exactly the same format as '''{_field_format(NUM_QUESTION_DOMAINS)}'''.")))
    o_domains = parse_domains(t.ask(OPTION_CLASSIFIER, (
        "You need to complete the following steps:1. Carefully read the medical scenario "
        f"presented in the question: '''{question}'''.2. The available options are: "
        f"'''{options}'''. Strive to understand the fundamental connections between the "
        "question and the options.3. Your core aim should be to categorize the options into two "
        "distinct subfields of medicine. You should only output in exactly the same format as "
        f"'''{_field_format(NUM_OPTION_DOMAINS)}'''")))
    q_raw = t.ask_all([(question_analyst(d), _question_prompt(question), 0.0)
                       for d in q_domains])
    q_analyses = {d: clean_analysis(a) for d, a in zip(q_domains, q_raw, strict=True)}
    o_raw = t.ask_all([(option_analyst(d), _option_prompt(question, options, q_analyses), 0.0)
                       for d in o_domains])
    o_analyses = {d: clean_analysis(a) for d, a in zip(o_domains, o_raw, strict=True)}
    synthesis = t.ask(SYNTHESIZER, _synthesis_prompt(
        _analyses_text(q_analyses, "Question", question),
        _analyses_text(o_analyses, "Options", options)))
    report, votes = _consensus(t, [*q_domains, *o_domains], question, options,
                               report_of(question, options, synthesis))
    raw = t.ask(NO_ROLE, _final_prompt(report))
    letter = parse_option(raw)
    result = t.result(letter if letter in item.options else None, raw)
    return result.model_copy(update={"extractor": EXTRACTOR, "trace": {
        "attempts": str(len(votes)),
        "no_votes": ",".join(str(r.count("no")) for r in votes)}})
