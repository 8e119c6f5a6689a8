"""The MedAgentsBench paper's methods, call for call: the JSON-schema answer extractor, MedAgents
(``syn_verif``) and MDAgents (``adaptive``, each route), on the OpenAI-compatible test server with
scripted replies; and a live ``execute_qa`` of both against the server on a tiny pool."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer
from support.qa_fakes import ScriptedModel

from tasks_lib.llm import LiteLLMCompletion, Message
from tasks_lib.qa import mdagents as md
from tasks_lib.qa import medagents as ma
from tasks_lib.qa.extractor import answer_schema, llm_extractor, regex_extractor
from tasks_lib.qa.method_base import MethodContext
from tasks_lib.qa.methods import METHODS
from tasks_lib.qa.types import Exemplar, PublicQAItem

ITEM = PublicQAItem(dataset="medqa", realidx="1",
                    question="Which anticoagulant acts on antithrombin",
                    options={"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"})
PUBMED = ITEM.model_copy(update={"dataset": "pubmedqa"})
MODEL = "openai/fake"
Body = dict[str, Any]


def _system(body: Body) -> str:
    return str(body["messages"][0]["content"])


def _last(body: Body) -> str:
    return str(body["messages"][-1]["content"])


def _door(srv: FakeOpenAIServer) -> LiteLLMCompletion:
    return LiteLLMCompletion(api_base=srv.base_url, cache=False, retries=0)


# ----------------------------------------------------------------------------- the extractor


def test_extractor_sends_the_option_enum_and_refuses_letters_outside_it() -> None:
    replies = iter(['{"answer_idx": "B"}', '{"answer_idx": "F"}', "B, I think"])
    with FakeOpenAIServer(lambda body: next(replies)) as srv:
        door = _door(srv)
        extract = llm_extractor("openai/mini")
        first = extract("Heparin works. The answer is (B).", ITEM.options, door)
        outside = extract("Warfarin. The answer is (C).", ITEM.options, door)
        not_json = extract("no letter here", ITEM.options, door)
    assert len(srv.requests) == 3
    body = srv.requests[0]
    assert body["model"] == "mini" and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": answer_schema(["A", "B", "C", "D"])}
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer_idx"]["enum"] == ["A", "B", "C", "D"]
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "Heparin works. The answer is (B)." in _last(body) and "A, B, C, D" in _last(body)
    assert (first.answer, first.extractor, first.refused) == ("B", "llm:openai/mini", None)
    assert first.completion is not None and first.completion.prompt_tokens > 0
    # 'F' is not an option: refused, the regex decides on the same text and says so.
    assert (outside.answer, outside.extractor) == ("C", "regex-fallback")
    assert outside.refused is not None and "'F'" in outside.refused
    assert (not_json.answer, not_json.extractor, not_json.refused) == (
        None, "regex-fallback", "reply is not JSON")


def test_extractor_on_a_messages_only_call_layer_and_the_regex_alternative() -> None:
    model = ScriptedModel('{"answer_idx": "D"}')
    found = llm_extractor()("I pick clopidogrel", ITEM.options, model)
    assert (found.answer, found.extractor) == ("D", "llm:gpt-4o-mini")
    assert '{"answer_idx": "<option>"}' in model.calls[0][-1].content
    offline = regex_extractor("The answer is (C).", ITEM.options, model)
    assert (offline.answer, offline.extractor, offline.completion) == ("C", "regex", None)
    assert len(model.calls) == 1  # the regex makes no call


# ----------------------------------------------------------------------------- MedAgents

Q_DOMAINS = ["Cardiology", "Hematology", "Pharmacology", "Neurology", "Nephrology"]
O_DOMAINS = ["Clinical Pharmacology", "Internal Medicine"]


class MedAgentsScript:
    """Replies by role; ``no_votes[k]`` are the domains voting NO on report k (REPORT-k)."""

    def __init__(self, no_votes: list[set[str]], final: str = "Option: B") -> None:
        self.no_votes, self.final = no_votes, final

    def __call__(self, body: Body) -> str:
        system, user = _system(body), _last(body)
        if system == ma.QUESTION_CLASSIFIER:
            return "Medical Field: " + " | ".join(Q_DOMAINS)
        if system == ma.OPTION_CLASSIFIER:
            return "Medical Field: " + " | ".join(O_DOMAINS)
        for d in Q_DOMAINS:
            if system == ma.question_analyst(d):
                return f"Analysis by {d}."
        for d in O_DOMAINS:
            if system == ma.option_analyst(d):
                return f"Options by {d}."
        if system == ma.SYNTHESIZER:
            return "Key Knowledge: heparin. Total Analysis: REPORT-0"
        for d in Q_DOMAINS + O_DOMAINS:
            if system == ma.voter(d):
                k = int(re.findall(r"REPORT-(\d)", user)[0])
                if "[YES or NO]" in user:
                    no = k < len(self.no_votes) and d in self.no_votes[k]
                    return "NO" if no else "YES"
                return f"Revisions: advice from {d} on {k}"
        assert system == ma.NO_ROLE
        if "Here is the original report" in user:
            k = int(re.findall(r"REPORT-(\d)", user)[0])
            return f"Total Analysis: REPORT-{k + 1}"
        return self.final


def _run_medagents(script: MedAgentsScript) -> tuple[Any, list[Body]]:
    with FakeOpenAIServer(script) as srv:
        result = METHODS.get("medagents")(ITEM, MODEL, _door(srv), MethodContext())
    return result, srv.requests


def _votes(requests: list[Body]) -> list[Body]:
    return [b for b in requests if "[YES or NO]" in _last(b)]


def test_medagents_all_agree_at_once_is_18_calls() -> None:
    result, requests = _run_medagents(MedAgentsScript([]))
    assert result.calls == len(requests) == 18
    assert (result.answer, result.raw, result.extractor) == ("B", "Option: B", "option-regex")
    assert result.trace == {"attempts": "1", "no_votes": "0"}
    roles = Counter(_system(b) for b in requests)
    assert roles[ma.QUESTION_CLASSIFIER] == roles[ma.OPTION_CLASSIFIER] == 1
    assert all(roles[ma.question_analyst(d)] == 1 for d in Q_DOMAINS)
    assert all(roles[ma.option_analyst(d)] == 1 for d in O_DOMAINS)
    assert all(roles[ma.voter(d)] == 1 for d in Q_DOMAINS + O_DOMAINS)
    assert roles[ma.SYNTHESIZER] == 1 and roles[ma.NO_ROLE] == 1
    assert all(b["temperature"] == 0.0 for b in requests)
    # The question gets its '?', the options are the dict the paper printed.
    classifier = next(b for b in requests if _system(b) == ma.OPTION_CLASSIFIER)
    assert "antithrombin?" in _last(classifier) and str(ITEM.options) in _last(classifier)
    # Option experts see every question analysis; the synthesizer sees all seven analyses.
    for b in requests:
        if _system(b) in {ma.option_analyst(d) for d in O_DOMAINS}:
            assert all(f"Analysis by {d}." in _last(b) for d in Q_DOMAINS)
    synth = next(b for b in requests if _system(b) == ma.SYNTHESIZER)
    assert all(f"by {d}." in _last(synth) for d in Q_DOMAINS + O_DOMAINS)
    # Voters and the final call see the report: question, options, Total Analysis (no Key
    # Knowledge); the final call comes last.
    assert all("Total Analysis: REPORT-0" in _last(b) and "heparin." not in _last(b)
               for b in _votes(requests))
    assert "REPORT-0" in _last(requests[-1]) and "Option: [Selected" in _last(requests[-1])


def test_medagents_no_votes_add_advice_and_a_revision() -> None:
    result, requests = _run_medagents(MedAgentsScript([{"Cardiology", "Internal Medicine"}]))
    assert result.calls == len(requests) == 18 + 7 + 2 + 1
    assert result.trace == {"attempts": "2", "no_votes": "2,0"}
    advice = [b for b in requests if "propose revisions" in _last(b)]
    assert sorted(_system(b) for b in advice) == [ma.voter("Cardiology"),
                                                  ma.voter("Internal Medicine")]
    revision = next(b for b in requests if "Here is the original report" in _last(b))
    assert _system(revision) == ma.NO_ROLE and "REPORT-0" in _last(revision)
    assert "advice from Cardiology on 0" in _last(revision)
    assert "advice from Internal Medicine on 0" in _last(revision)
    second = _votes(requests)[7:]
    assert len(second) == 7 and all("REPORT-1" in _last(b) for b in second)
    assert "REPORT-1" in _last(requests[-1]) and result.answer == "B"


def test_medagents_three_dissenting_attempts_is_the_maximum() -> None:
    everyone = set(Q_DOMAINS + O_DOMAINS)
    result, requests = _run_medagents(
        MedAgentsScript([everyone] * 5, final="Option: the best is (E) none"))
    assert result.calls == len(requests) == 10 + 3 * (7 + 7 + 1) + 1 == 56
    assert result.trace["attempts"] == "3"
    assert "REPORT-3" in _last(requests[-1])
    assert result.answer is None  # E is not one of the item's options: no answer


def test_medagents_final_parse_is_the_papers() -> None:
    assert ma.parse_option("Option: C") == "C"
    assert ma.parse_option("I choose B. Option: (D) Clopidogrel") == "D"
    assert ma.parse_option("Option: heparin") is None
    assert ma.parse_vote("I do not agree") == "no" and ma.parse_vote("Sure!") == "yes"


# ----------------------------------------------------------------------------- MDAgents

EXPERTS = [("cardiologist", "treats the heart."), ("hematologist", "treats the blood."),
           ("pharmacologist", "knows drugs."), ("neurologist", "treats nerves."),
           ("nephrologist", "treats kidneys.")]
RECRUITED = "\n".join(f"{i + 1}. {r.title()} - {d.title()} - Hierarchy: Independent"
                      for i, (r, d) in enumerate(EXPERTS))
TEAMS = ("Group 1 - Initial Assessment Team (IAT)\nMember 1: Cardiologist (Lead) - Heart.\n"
         "Member 2: Hematologist - Blood.\nMember 3: Pharmacologist - Drugs.\n\n"
         "Group 2 - Diagnostic Evidence Team (DET)\nMember 1: Radiologist (Lead) - Images.\n"
         "Member 2: Pathologist - Tissue.\nMember 3: Geneticist - Genes.\n\n"
         "Group 3 - Final Review and Decision Team (FRDT)\nMember 1: Senior Consultant (Lead) - "
         "Oversight.\nMember 2: Internist - General.\nMember 3: Pharmacist - Doses.")


def _expert_system(role: str, desc: str) -> str:
    return f"You are a {role} who {desc}. Your job is to collaborate with other medical experts " \
           "in a team."


class MDAgentsScript:
    """Replies by role. ``talkers``: expert number → how many of its 'do you want to talk'
    questions it answers yes (to expert ``(n % 5) + 1``)."""

    def __init__(self, route: str, talkers: dict[int, int] | None = None) -> None:
        self.route, self.talkers = route, talkers or {}

    def __call__(self, body: Body) -> str:
        system, user = _system(body), _last(body)
        if "response_format" in body:
            return '{"answer_idx": "B"}'
        if user == system:
            return "Understood."
        if system == md.ASSESSOR:
            return f"The query is {self.route}."
        if system == md.HELPER:
            return "Because heparin binds antithrombin."
        if system in (md.SINGLE, md.MODERATOR, md.DECIDER):
            return "Step by step... Answer: B) Heparin"
        if system == md.RECRUITER:
            return RECRUITED if "You can recruit" in user else "It supports the answer."
        if system == md.SYNTHESIZER:
            return "Key Knowledge: x; Total Analysis: y"
        if system == md.MDT_RECRUITER:
            return TEAMS
        for n, (role, desc) in enumerate(EXPERTS, start=1):
            if system == _expert_system(role, desc):
                return self._expert(n, role, body)
        role = system.removeprefix("You are a ").split(" who ")[0]
        if "You are the lead of the medical group" in user:
            return f"Investigations asked by {role}"
        if "Your group lead is asking" in user:
            return f"Report of {role}"
        assert "The gathered investigation" in user, user
        return f"Team answer of {role}: B"

    def _expert(self, n: int, role: str, body: Body) -> str:
        user = _last(body)
        if "indicate whether you want to talk" in user:
            asked = sum("indicate whether you want to talk" in str(m["content"])
                        for m in body["messages"] if m["role"] == "user")
            return "yes" if asked <= self.talkers.get(n, 0) else "no"
        if "Enter the number of the expert" in user:
            return str(n % 5 + 1)
        if "leave your opinion" in user:
            return f"msg from {role}"
        return "Answer: B"


def _run_mdagents(script: MDAgentsScript, item: PublicQAItem = ITEM,
                  ctx: MethodContext | None = None) -> tuple[Any, list[Body]]:
    with FakeOpenAIServer(script) as srv:
        result = METHODS.get("mdagents")(item, MODEL, _door(srv), ctx or MethodContext())
    return result, srv.requests


SHOTS = [Exemplar(dataset="medqa", question=f"Shot question {i}?",
                  options={"A": f"wrong {i}", "B": f"right {i}"}, answer_idx="B")
         for i in range(6)]


def test_mdagents_basic_route_with_medqa_exemplars() -> None:
    result, requests = _run_mdagents(MDAgentsScript("basic"), ctx=MethodContext(exemplars=SHOTS))
    # assessor (priming + 1), 5 rationales, single agent (priming + answer), extractor
    assert result.calls == len(requests) == 2 + 5 + 2 + 1
    assert (result.answer, result.extractor, result.trace) == ("B", "llm:gpt-4o-mini",
                                                               {"route": "basic"})
    assert result.extractor_calls == 1 and result.raw == "Step by step... Answer: B) Heparin"
    assert 0 < result.extractor_prompt_tokens < result.prompt_tokens
    assessor = [b for b in requests if _system(b) == md.ASSESSOR]
    assert [m["role"] for m in assessor[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert all(b["temperature"] == 1.0 for b in assessor)
    query = _last(assessor[1])
    assert " Options: " in query and all(f"({k}) {v}" in query for k, v in ITEM.options.items())
    answer = next(b for b in requests if _system(b) == md.SINGLE and _last(b) != md.SINGLE)
    assert answer["temperature"] == 0.0
    turns = answer["messages"]
    assert len(turns) == 1 + 10 + 2 + 1  # system, 5 shots as prior turns, priming, question
    assert turns[2]["content"].startswith("Answer: (B) right") \
        and turns[2]["content"].endswith("Because heparin binds antithrombin.")
    assert {t["content"].split(" ")[2] for t in turns[1:11:2]} < {f"{i}?" for i in range(6)}
    extractor = requests[-1]
    assert extractor["model"] == "gpt-4o-mini" and "Step by step" in _last(extractor)
    assert extractor["response_format"]["json_schema"]["schema"]["properties"]["answer_idx"][
        "enum"] == ["A", "B", "C", "D"]


def test_mdagents_basic_without_options_off_medqa_and_the_options_variant() -> None:
    result, requests = _run_mdagents(MDAgentsScript("basic"), item=PUBMED,
                                     ctx=MethodContext(exemplars=SHOTS, extractor="regex"))
    assert result.calls == len(requests) == 2 + 2  # no exemplars off medqa; regex: no call
    assert (result.answer, result.extractor, result.extractor_calls) == ("B", "regex", 0)
    assert "Options:" not in _last(requests[1]) and "Heparin" not in _last(requests[1])
    with FakeOpenAIServer(MDAgentsScript("basic")) as srv:
        METHODS.get("mdagents_options")(PUBMED, MODEL, _door(srv), MethodContext())
    assert "(B) Heparin" in _last(srv.requests[1])


def test_mdagents_intermediate_stops_when_nobody_wants_to_talk() -> None:
    result, requests = _run_mdagents(MDAgentsScript("intermediate"), item=PUBMED)
    # assessor 2, recruiter 2, 5 primings, 5 opinions, synthesizer 2, 5 'talk?', 5 finals,
    # moderator 2, extractor 1
    assert result.calls == len(requests) == 29
    assert result.trace == {"route": "intermediate", "experts": "5", "rounds": "1"}
    assert result.answer == "B"
    synth = next(b for b in requests if _system(b) == md.SYNTHESIZER and "reports" in _last(b))
    assert all(f"({r}): Answer: B" in _last(synth) for r, _ in EXPERTS)
    talk = [b for b in requests if "indicate whether you want to talk" in _last(b)]
    assert len(talk) == 5 and all("(cardiologist): Answer: B" in _last(b) for b in talk)
    moderator = next(b for b in requests if _system(b) == md.MODERATOR and "majority" in _last(b))
    assert moderator["temperature"] == 0.0
    assert all(f"'{r}': 'Answer: B'" in _last(moderator) for r, _ in EXPERTS)
    assert _last(requests[-1]).endswith("Step by step... Answer: B) Heparin")


def test_mdagents_intermediate_debate_on_medqa() -> None:
    """Expert 1 talks (to expert 2) in the first turn only: +1 choice, +1 message, +5 'talk?'."""
    result, requests = _run_mdagents(MDAgentsScript("intermediate", {1: 1}),
                                     ctx=MethodContext(exemplars=SHOTS))
    assert result.calls == len(requests) == 29 + 5 + 2 + 5  # + medqa rationales
    rationales = [b for b in requests if _system(b) == md.RECRUITER and "[Example" in _last(b)]
    assert len(rationales) == 5
    opinions = [b for b in requests if "Given the examplers" in _last(b)]
    assert len(opinions) == 5 and all("It supports the answer." in _last(b) for b in opinions)
    message = next(b for b in requests if "leave your opinion" in _last(b))
    assert "(Agent 2. hematologist)" in _last(message)
    assert _system(message) == _expert_system(*EXPERTS[0])


def test_mdagents_intermediate_later_rounds_show_the_messages_sent_this_turn() -> None:
    """Everyone always wants to talk: 5 rounds × 5 turns; from round 2 each expert sees what the
    experts before it sent it in the same turn (so those turns run in order)."""

    class Talkative(ScriptedModel):
        def reply(self, messages: list[Message]) -> str:
            body = {"messages": [m.model_dump() for m in messages]}
            return MDAgentsScript("intermediate", {n: 99 for n in range(1, 6)})(body)

    model = Talkative()
    result = METHODS.get("mdagents")(PUBMED, MODEL, model, MethodContext(extractor="regex"))
    assert result.trace["rounds"] == "5"
    # 2 + 2 + 5 + 5 + 5 rounds × (2 + 5 turns × 5 × 3) + 5 + 2 (regex: no extractor call)
    assert result.calls == len(model.calls) == 2 + 2 + 5 + 5 + 5 * (2 + 5 * 5 * 3) + 5 + 2
    late = [c for c in model.calls if "indicate whether" in c[-1].content
            and "Agent 1 -> Agent 2: msg from cardiologist" in c[-1].content]
    assert late and all(c[0].content == _expert_system(*EXPERTS[1]) for c in late)


def test_mdagents_advanced_route() -> None:
    result, requests = _run_mdagents(MDAgentsScript("advanced"), item=PUBMED)
    # assessor 2, recruiter 2, 9 primings, IAT 4, DET 4, FRDT 4 + 4 again, decider 2, extractor 1
    assert result.calls == len(requests) == 2 + 2 + 9 + 4 + 4 + 4 + 4 + 2 + 1 == 32
    assert result.trace == {"route": "advanced", "teams": "3", "initial_teams": "1"}
    deliveries = Counter(_system(b) for b in requests if "You are the lead of" in _last(b))
    assert deliveries == {"You are a Cardiologist (Lead) who heart..": 1,
                          "You are a Radiologist (Lead) who images..": 1,
                          "You are a Senior Consultant (Lead) who oversight..": 2}
    member = next(b for b in requests if "Your group lead is asking" in _last(b)
                  and "Hematologist" in _system(b))
    assert "Investigations asked by Cardiologist (Lead)" in _last(member)
    lead = next(b for b in requests if "The gathered investigation" in _last(b)
                and "Cardiologist" in _system(b))
    assert "[Hematologist]\nReport of Hematologist" in _last(lead)
    decision = next(b for b in requests if _system(b) == md.DECIDER and "Investigation:" in
                    _last(b))
    assert decision["temperature"] == 0.0
    assert "Team answer of Cardiologist (Lead): B" in _last(decision)
    assert "Radiologist" not in _last(decision) and "Senior Consultant" not in _last(decision)
    assert result.answer == "B"


def test_mdagents_shuffles_are_seeded() -> None:
    def queries(seed: int) -> list[str]:
        model = ScriptedModel("basic")
        METHODS.get("mdagents")(ITEM, MODEL, model, MethodContext(seed=seed, extractor="regex"))
        return [c[-1].content for c in model.calls]

    assert queries(3) == queries(3)
    orders = {re.findall(r"\(([A-D])\)", queries(s)[1])[0] for s in range(8)}
    assert len(orders) > 1  # the option order does depend on the seed


# ----------------------------------------------------------------------------- live run


def _either(body: Body) -> str:
    system = _system(body)
    if "response_format" in body or system in (md.ASSESSOR, md.SINGLE) or user_is_prime(body):
        return MDAgentsScript("basic")(body)
    return MedAgentsScript([{"Neurology"}])(body)


def user_is_prime(body: Body) -> bool:
    return _last(body) == _system(body)


@pytest.mark.usefixtures("prefect_harness")
def test_execute_qa_runs_both_paper_methods_live() -> None:
    from support.ops_support import publish_test_pool

    from flows.execute import execute_qa
    from tasks_lib.records import SUBMISSION, run_store
    from tasks_lib.settings import reset_settings
    from tasks_lib.storage import Storage
    from tasks_lib.tracks.qa import ANSWERS

    pool = publish_test_pool("paper-methods", {"medqa": 2}).url
    with FakeOpenAIServer(_either) as srv:
        os.environ["MEDFLOWS_LLM_API_BASE"] = srv.base_url
        reset_settings()
        try:
            runs = execute_qa(pool=pool, agents=["gpt-4o-mini@medagents", "gpt-4o-mini@mdagents"])
        finally:
            os.environ.pop("MEDFLOWS_LLM_API_BASE")
            reset_settings()
    by_agent = {r.agent.agent_id: r for r in runs}
    assert set(by_agent) == {"gpt-4o-mini@medagents", "gpt-4o-mini@mdagents"}
    assert all(r.status.value == "completed" and r.n_answered == 2 for r in runs)
    assert by_agent["gpt-4o-mini@medagents"].turns == 2 * 27  # one NO vote: +advice, revision
    assert by_agent["gpt-4o-mini@mdagents"].turns == 2 * 5  # basic, no exemplars in the pool
    assert len(srv.requests) == 2 * 27 + 2 * 5
    for run in runs:
        lines = [json.loads(line) for line in
                 run_store(run.run_id).read_text(f"{SUBMISSION}/{ANSWERS}").splitlines()]
        assert [a["answer"] for a in lines] == ["B", "B"] and all(a["error"] is None
                                                                  for a in lines)
        decided = {a["extractor"] for a in lines}
        assert decided == ({"option-regex"} if run.agent.method == "medagents"
                           else {"llm:gpt-4o-mini"})
        assert all(a["cost_usd"] and a["cost_usd"] > 0 for a in lines)  # priced, extractor too
    assert by_agent["gpt-4o-mini@mdagents"].cost_usd == pytest.approx(sum(
        a["cost_usd"] for a in run_store(by_agent["gpt-4o-mini@mdagents"].run_id).read_jsonl(
            f"{SUBMISSION}/{ANSWERS}")))

    # the published rows, replayed on the same pool, land in the same leaderboard and plot
    from support.paths import QA_SOURCE

    from flows.report import report_qa
    from flows.score import score_qa

    execute_qa(pool=pool, replay=str(QA_SOURCE / "predictions" / "hard.csv.gz"),
               replay_models=["gpt-4o-mini"], replay_methods=["medagents", "mdagents"])
    score_qa(pool=pool)
    files = report_qa(pool=pool)
    board = list(csv.DictReader(io.StringIO(
        Storage(files.csv.rsplit("/", 1)[0]).read_text("leaderboard.csv"))))
    assert {r["agent_id"] for r in board} >= {
        "gpt-4o-mini@medagents", "gpt-4o-mini@mdagents",
        "replay:gpt-4o-mini@medagents", "replay:gpt-4o-mini@mdagents"}, board
    live = next(r for r in board if r["agent_id"] == "gpt-4o-mini@mdagents")
    assert float(live["cost_per_item_usd"]) > 0  # priced like the published rows (Pareto plot)


# ----------------------------------------------------------------------------- the other methods
# Replies carry markers: a model states its letter as 'ANSWER-X'; the extractor (any request with a
# response_format) returns the last marker's letter (its thinking: 'TH<' + the text + '>'), the
# index of 'PICK-n' over an index enum, or the verdict of 'VERDICT-True/False' for a review.

OPTIONS_LINE = "(A) Aspirin (B) Heparin (C) Warfarin (D) Clopidogrel"


def _text(body: Body) -> str:
    return _last(body).split("\nText:\n", 1)[1]


def _extractor_reply(body: Body) -> str:
    fmt = body["response_format"]["json_schema"]["schema"]["properties"]
    text = _text(body)
    if "review_result" in fmt:
        verdict = re.findall(r"VERDICT-(True|False)", text)[-1]
        return json.dumps({"explanation": f"EXPL({text[:12]})", "review_result": verdict == "True"})
    if fmt["answer_idx"]["enum"][0].isdigit():
        return json.dumps({"answer_idx": re.findall(r"PICK-(\d)", text)[-1]})
    reply = {"answer_idx": re.findall(r"ANSWER-([A-Z])", text)[-1]}
    return json.dumps({"thinking": f"TH<{text}>", **reply} if "thinking" in fmt else reply)


def _is_extractor(body: Body) -> bool:
    return "response_format" in body


def _run(method: str, model_reply: Any, ctx: MethodContext | None = None,
         item: PublicQAItem = ITEM) -> tuple[Any, list[Body]]:
    def responder(body: Body) -> str:
        return _extractor_reply(body) if _is_extractor(body) else str(model_reply(body))

    with FakeOpenAIServer(responder) as srv:
        result = METHODS.get(method)(item, MODEL, _door(srv), ctx or MethodContext())
    return result, srv.requests


def _assert_paper_call(body: Body, roles: list[str]) -> None:
    """A model call as the paper made it: temperature 0, seed 42, the options as '(A) x …'."""
    assert body["model"] == "fake" and body["temperature"] == 0.0 and body["seed"] == 42
    assert [m["role"] for m in body["messages"]] == roles and not _is_extractor(body)


def _assert_extracts(body: Body, text: str, enum: list[str], thinking: bool = False) -> None:
    assert body["model"] == "gpt-4o-mini" and _text(body) == text
    assert body["response_format"]["json_schema"] == answer_schema(enum, thinking)


def _split(requests: list[Body]) -> tuple[list[Body], list[Body]]:
    return ([b for b in requests if not _is_extractor(b)],
            [b for b in requests if _is_extractor(b)])


def test_zero_shot_is_one_call_and_one_extractor_call() -> None:
    result, requests = _run("zero_shot", lambda body: "ANSWER-B")
    assert result.calls == len(requests) == 2 and result.extractor_calls == 1
    _assert_paper_call(requests[0], ["system", "user"])
    assert _system(requests[0]).startswith("You are a knowledgeable medical assistant.")
    assert f"Options:\n{OPTIONS_LINE}\n\nReply with the answer index only." in _last(requests[0])
    _assert_extracts(requests[1], "ANSWER-B", ["A", "B", "C", "D"])
    assert (result.answer, result.raw, result.extractor) == ("B", "ANSWER-B", "llm:gpt-4o-mini")
    assert 0 < result.extractor_prompt_tokens < result.prompt_tokens


def test_zero_shot_with_the_regex_extractor_makes_no_extractor_call() -> None:
    result, requests = _run("zero_shot", lambda body: "The answer is (C).",
                            MethodContext(extractor="regex"))
    assert result.calls == len(requests) == 1
    assert (result.answer, result.extractor, result.extractor_calls) == ("C", "regex", 0)


def test_few_shot_shows_the_first_five_exemplars_with_answer_texts() -> None:
    result, requests = _run("few_shot", lambda body: "ANSWER-B", MethodContext(exemplars=SHOTS))
    assert result.calls == len(requests) == 2 and result.answer == "B"
    _assert_paper_call(requests[0], ["system", "user"])
    assert _system(requests[0]).endswith("(with answers) about medical knowledge.")
    user = _last(requests[0])
    shot = "Question: Shot question 0?\nOptions: {'A': 'wrong 0', 'B': 'right 0'}\nAnswer: right 0"
    assert shot in user
    assert "Shot question 4?" in user and "Shot question 5?" not in user  # first 5 only
    assert user.endswith(f"Question:\n{ITEM.question}\n\nOptions:\n{OPTIONS_LINE}\n\n")
    _assert_extracts(requests[1], "ANSWER-B", ["A", "B", "C", "D"])


def test_cot_extractor_returns_thinking_and_answer() -> None:
    result, requests = _run("cot", lambda body: "Heparin binds antithrombin. ANSWER-B")
    assert result.calls == len(requests) == 2 and result.extractor_calls == 1
    _assert_paper_call(requests[0], ["system", "user"])
    assert "first thinking step-by-step" in _last(requests[0])
    _assert_extracts(requests[1], "Heparin binds antithrombin. ANSWER-B", ["A", "B", "C", "D"],
                     thinking=True)
    assert result.answer == "B"


def test_cot_sc_is_five_extracted_samples_then_an_llm_ensemble_over_the_letters() -> None:
    letters = iter("ABBCB")
    result, requests = _run("cot_sc", lambda body: (
        "consensus: ANSWER-B" if "Several solutions" in _last(body)
        else f"long reasoning ANSWER-{next(letters)}"))
    model, extractor = _split(requests)
    assert result.calls == len(requests) == 12 and len(model) == len(extractor) == 6
    assert result.extractor_calls == 6
    samples, ensemble = model[:5], model[5]
    assert all(_system(b) == _system(samples[0]) and _last(b) == _last(samples[0])
               for b in samples)  # the same CoT request 5 times (temperature 0, seed 42)
    for b in model:
        _assert_paper_call(b, ["system", "user"])
    assert "Several solutions" in _last(ensemble) and requests.index(ensemble) == 10
    # The ensemble sees only the five extracted letters, never the reasoning.
    shown = re.findall(r"Solution (\d):\n([A-Z])\n", _last(ensemble) + "\n")
    assert [n for n, _ in shown] == ["1", "2", "3", "4", "5"]
    assert sorted(v for _, v in shown) == sorted("ABBCB") and "reasoning" not in _last(ensemble)
    assert sorted(_text(b) for b in extractor[:5]) == sorted(
        f"long reasoning ANSWER-{v}" for v in "ABBCB")
    _assert_extracts(requests[-1], "consensus: ANSWER-B", ["A", "B", "C", "D"])
    assert result.answer == "B" and result.raw == "consensus: ANSWER-B"
    assert sorted(result.trace["samples"].split(",")) == sorted("ABBCB")


def test_multi_persona_two_rounds_and_a_senior_expert() -> None:
    roles = {"Innovative": "R-MD", "Critical": "R-PROF", "Clinical Decision": "R-RES"}

    def reply(body: Body) -> str:
        user = _last(body)
        who = next(tag for key, tag in roles.items() if user.startswith(f"You are a {key}")) \
            if not user.startswith("You are a senior") else "SENIOR"
        stage = "R1" if "Based on your medical expertise" in user else (
            "R2" if "insights from your peers" in user else "FINAL")
        return f"{stage} by {who} ANSWER-{'C' if (stage, who) == ('R1', 'R-MD') else 'B'}"

    result, requests = _run("multi_persona", reply)
    model, extractor = _split(requests)
    assert result.calls == len(requests) == 14 and len(model) == len(extractor) == 7
    for b in model:
        _assert_paper_call(b, ["user"])
        assert f"Options:\n{OPTIONS_LINE}\n" in _last(b)
    first, second, final = model[:3], model[3:6], model[6]
    assert all("Based on your medical expertise" in _last(b) for b in first)
    assert max(requests.index(b) for b in first) < min(requests.index(b) for b in second)
    for b in second:  # each sees the other two roles' round-1 thinking, as extracted
        mine = next(tag for key, tag in roles.items() if _last(b).startswith(f"You are a {key}"))
        seen = re.findall(r"previous thinking: TH<R1 by (R-\w+)", _last(b))
        assert sorted(seen) == sorted(set(roles.values()) - {mine})
    assert _last(final).startswith("You are a senior medical expert.")
    assert sorted(re.findall(r"final thinking: TH<R2 by (R-\w+)", _last(final))) == sorted(
        roles.values())
    assert "Innovative Medical Thinker - MD's final answer: B" in _last(final)
    assert all(b["response_format"]["json_schema"] == answer_schema(["A", "B", "C", "D"], True)
               for b in extractor)
    assert _text(requests[-1]) == "FINAL by SENIOR ANSWER-B" and result.answer == "B"
    assert sorted(result.trace["rounds"].split("|")[0].split(",")) == ["B", "B", "C"]


def _refine(verdicts: list[bool]) -> tuple[Any, list[Body]]:
    reviews = iter(verdicts)
    revisions = iter(range(1, 10))

    def reply(body: Body) -> str:
        user = _last(body)
        if "critically evaluate" in user:
            return f"VERDICT-{next(reviews)}"
        if "please revise the solution" in user:
            return f"REVISION-{next(revisions)} ANSWER-C"
        return "FIRST ANSWER-A"

    return _run("self_refine", reply)


def test_self_refine_stops_when_the_first_review_accepts() -> None:
    result, requests = _refine([True])
    model, extractor = _split(requests)
    assert result.calls == len(requests) == 6 and (len(model), len(extractor)) == (2, 4)
    for b in model:
        _assert_paper_call(b, ["user"])
    assert "95 percent confident" in _last(model[1]) and "FIRST ANSWER-A" in _last(model[1])
    assert OPTIONS_LINE not in _last(model[1])  # the paper's review sees the question only
    review = extractor[1]["response_format"]["json_schema"]["schema"]["properties"]
    assert review["review_result"] == {"type": "boolean"} and _text(extractor[1]) == "VERDICT-True"
    assert [_text(b) for b in (extractor[0], extractor[2], extractor[3])] == ["FIRST ANSWER-A"] * 3
    assert (result.answer, result.raw, result.trace) == ("A", "FIRST ANSWER-A",
                                                         {"reviews": "True"})


def test_self_refine_revises_on_false_with_the_extracted_feedback() -> None:
    result, requests = _refine([False, True])
    model, extractor = _split(requests)
    assert (len(model), len(extractor)) == (4, 6) and result.extractor_calls == 6
    revise = next(b for b in model if "please revise the solution" in _last(b))
    assert "Original Solution:\nFIRST ANSWER-A" in _last(revise)
    assert "Feedback:\nEXPL(VERDICT-Fals)" in _last(revise)  # the extractor's explanation
    second_review = [b for b in model if "critically evaluate" in _last(b)][1]
    assert "Solution:\nREVISION-1 ANSWER-C" in _last(second_review)
    assert (result.answer, result.raw) == ("C", "REVISION-1 ANSWER-C")
    assert result.trace["reviews"] == "False,True"


def test_self_refine_three_rejections_is_the_maximum() -> None:
    result, requests = _refine([False, False, False, True])
    model, extractor = _split(requests)
    assert (len(model), len(extractor)) == (7, 8) and result.calls == 15
    assert _text(requests[-1]) == "REVISION-3 ANSWER-C" and result.answer == "C"
    assert result.trace["reviews"] == "False,False,False"


def test_medprompt_votes_over_shuffled_solution_orders() -> None:
    generated = iter(["SOL-1 ANSWER-A", "SOL-2 ANSWER-B", "SOL-3 ANSWER-C"])

    def reply(body: Body) -> str:
        user = _last(body)
        if "candidate solutions" in user:  # every vote picks SOL-2 wherever it is shown
            shown = re.findall(r"(\d): \nSOL-(\d)", user)
            return "I pick PICK-" + next(i for i, s in shown if s == "2")
        return next(generated)

    result, requests = _run("medprompt", reply, MethodContext(seed=7))
    model, extractor = _split(requests)
    assert result.calls == len(requests) == 10 and (len(model), len(extractor)) == (6, 4)
    generations, votes = model[:3], model[3:]
    for b in model:
        _assert_paper_call(b, ["user"])
    assert all(_last(b) == _last(generations[0]) and "without any additional text" in _last(b)
               and OPTIONS_LINE in _last(b) for b in generations)  # no option shuffling
    assert max(requests.index(b) for b in generations) < min(requests.index(b) for b in votes)
    for b in votes:  # every vote shows the three solutions, in some order, and asks for an index
        assert sorted(re.findall(r"\d: \nSOL-(\d)", _last(b))) == ["1", "2", "3"]
        assert _last(b).endswith("from the following options: 0, 1, 2.")
        assert OPTIONS_LINE not in _last(b)
    picks = [b for b in extractor if b["response_format"]["json_schema"]["schema"]["properties"][
        "answer_idx"]["enum"] == ["0", "1", "2"]]
    assert len(picks) == 3
    _assert_extracts(requests[-1], "SOL-2 ANSWER-B", ["A", "B", "C", "D"])
    assert (result.answer, result.raw) == ("B", "SOL-2 ANSWER-B")
    assert len(set(result.trace["picks"].split(","))) == 1


def test_medprompt_vote_shuffles_are_seeded_and_the_majority_pick_wins() -> None:
    from tasks_lib.llm_scope import current_branch

    class ByBranch(ScriptedModel):
        """Generation i answers 'SOL-i ANSWER-<A,B,C>'; a vote picks the shown index of SOL-2
        except vote 2, which picks SOL-0."""

        def reply(self, messages: list[Message]) -> str:
            user = messages[-1].content
            if "candidate solutions" in user:
                shown = re.findall(r"(\d): \nSOL-(\d)", user)
                want = "0" if current_branch()[0] == 2 else "2"
                return "PICK-" + next(i for i, s in shown if s == want)
            return f"SOL-{current_branch()[0]} ANSWER-{'ABC'[current_branch()[0]]}"

    def run(seed: int) -> tuple[Any, list[str]]:
        model = ByBranch()
        result = METHODS.get("medprompt")(ITEM, MODEL, model,
                                          MethodContext(seed=seed, extractor="regex"))
        orders = sorted("".join(re.findall(r"\d: \nSOL-(\d)", c[-1].content))
                        for c in model.calls if "candidate solutions" in c[-1].content)
        return result, orders

    result, orders = run(3)
    assert result.calls == 6 and result.extractor == "regex"
    assert (result.answer, result.trace["picks"], result.trace["chosen"]) == ("C", "2,2,0", "2")
    assert run(3)[1] == orders
    assert len({tuple(run(s)[1]) for s in range(6)}) > 1  # the orders depend on the seed


def test_reasoning_models_get_no_seed_temperature_or_system_role() -> None:
    from tasks_lib.qa.method_base import paper_params

    assert paper_params("openai/o3-mini") == {} and paper_params("deepseek-r1") == {}
    assert paper_params("anthropic/claude-3-5-sonnet-20241022") == {"temperature": 0.0}
    assert paper_params("gpt-4o-mini") == {"temperature": 0.0, "seed": 42}
    with FakeOpenAIServer(lambda body: _extractor_reply(body) if _is_extractor(body)
                          else "ANSWER-D") as srv:
        result = METHODS.get("zero_shot")(ITEM, "openai/o3-mini", _door(srv), MethodContext())
    first = srv.requests[0]
    assert "seed" not in first and "temperature" not in first
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert _last(first).startswith("You are a knowledgeable medical assistant.")
    assert result.answer == "D"
