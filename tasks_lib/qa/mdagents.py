"""MDAgents (the MedAgentsBench ``adaptive`` run of ``baselines/MDAgents``), call for call.

Agents keep their conversation: each has a system instruction and, as in the paper, is first told
its own instruction once more as a user message (a "priming" call whose reply stays in its
history). Chat calls use the provider's default temperature, 1.0; the paper's ``temp_responses``
calls (the single agent's answer, the moderator, the final decision-maker) use 0.0.

1. **Difficulty**: an assessor (priming + 1 call) answers basic / intermediate / advanced, read by
   keyword ("basic" or "1)", then "intermediate" or "2)", then "advanced" or "3)"; none → basic,
   the authors' later fix — at c5bf425 such an item crashed and was dropped).
2. **Basic**: on medqa, 5 shuffled train exemplars (options shuffled) each get a 1–2 sentence
   rationale from one helper agent (5 calls, one conversation); a single agent holding them as
   prior turns is primed and answers at temperature 0.
3. **Intermediate**: a recruiter (priming + 1 call) names 5 experts ("N. Role - description -
   Hierarchy: …"); each expert is primed and gives an initial opinion (few-shot on medqa: the
   recruiter writes the 5 rationales); then up to 5 rounds, each opening with a synthesizer's
   report (priming + 1 call; its output is unused, as in the paper) and running up to 5 turns in
   which every expert is asked whether it wants to talk (yes/no), and if yes which experts (by
   number) and then one message per chosen expert. A turn in which nobody says yes ends the
   debate. In round 1 every expert sees the initial opinions; in later rounds, the messages sent
   to it in the current turn. Then every expert gives a final answer and a moderator (priming +
   1 call at temperature 0) takes the majority vote.
4. **Advanced**: a recruiter (priming + 1 call) organises MDTs ("Group k - goal" / "Member j:
   Role - expertise", which must include an Initial Assessment Team and a Final Review and Decision
   Team); every member is primed. A team interaction is: the lead (a member whose role says
   "Lead", else the first member) assigns investigations, every other member reports, the lead
   answers. The initial-assessment teams interact, then every other team, then the review/decision
   teams once more (so the FRDT interacts twice, as in the paper). A decision-maker (priming + 1
   call at temperature 0) sees **only the initial-assessment report**.
5. The final text goes to the answer extractor (the paper's gpt-4o-mini parser; ``ctx.extractor``).

Calls per item, the extractor's included (5 experts; 3 MDTs of 3 with a lead): basic 5 (10 on
medqa); intermediate 29 when nobody wants to talk (34 on medqa), plus 1 + (experts chosen) for
every "yes", 5 for every further turn and 2 for every further round; advanced 32 (2 + 2 + 9
primings + 3 teams × 4 + the FRDT's second 4 + 2 + 1). Every call is counted, the priming calls
included (the paper made them but did not add their tokens).

Where the paper is nondeterministic (unseeded shuffles of the option order, of the exemplars and
of their options) we draw from ``random.Random`` seeded by ``ctx.seed``, the dataset and the item.
**Options**: up to c5bf425 the paper appended the options to the question for medqa only (other
datasets ran without them; MedXpertQA's question text embeds them) — that is ``mdagents``; the
variant ``mdagents_options`` shows them on every dataset (the authors' later fix).

Independent calls run concurrently (:func:`tasks_lib.llm_scope.gather`): the experts' priming,
initial opinions and final answers, round 1's turns (each expert's chain of calls, since they see
the same opinions), the MDT members' priming and reports, the teams of one phase. Later rounds'
turns stay in order (an expert sees what earlier experts just sent it). Departures from the paper,
all where it would crash and drop the item: unparseable recruiter lines and out-of-range expert
numbers are skipped, teams without members are skipped. Replies are read by
:mod:`tasks_lib.qa.mdagents_replies`. """

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence

from tasks_lib.llm import CompletionFn, Message
from tasks_lib.llm_scope import gather
from tasks_lib.qa.mdagents_replies import INITIAL, REVIEW, parse_experts, parse_teams, route_of
from tasks_lib.qa.method_base import METHODS, CallTally, MethodContext, MethodResult
from tasks_lib.qa.types import Exemplar, PublicQAItem

CHAT_TEMPERATURE = 1.0
"""The provider default the paper's chat calls ran at (they passed no temperature)."""
ROUNDS, TURNS, N_EXPERTS, N_TEAMS, N_MEMBERS = 5, 5, 5, 3, 3

ASSESSOR = ("You are a medical expert who conducts initial assessment and your job is to decide "
            "the difficulty/complexity of the medical query.")
HELPER = "You are a helpful medical agent."
SINGLE = ("You are a helpful assistant that answers multiple choice questions about medical "
          "knowledge.")
RECRUITER = ("You are an experienced medical expert who recruits a group of experts with diverse "
             "identity and ask them to discuss and solve the given medical query.")
SYNTHESIZER = ("You are a medical assistant who excels at summarizing and synthesizing based on "
               "multiple experts from various domain experts.")
MODERATOR = ("You are a final medical decision maker who reviews all opinions from different "
             "medical experts and make final decision.")
MDT_RECRUITER = ("You are an experienced medical expert. Given the complex medical query, you "
                 "need to organize Multidisciplinary Teams (MDTs) and the members in MDT to make "
                 "accurate and robust answer.")
DECIDER = ("You are an experienced medical expert. Now, given the investigations from "
           "multidisciplinary teams (MDT), please review them very carefully and return your "
           "final decision to the medical query.")
RATIONALE = ("Below is an example of medical knowledge question and answer. After reviewing the "
             "below medical question and answering, can you provide 1-2 sentences of reason that "
             "support the answer as you didn't know the answer ahead?\n\nQuestion: {question}"
             "\n\nAnswer: {answer}")


class _ChatTally(CallTally):
    """A tally that also sends whole conversations."""

    def converse(self, messages: Sequence[Message], temperature: float) -> str:
        reply = self.complete(self.model, list(messages), temperature=temperature)
        self.calls.append(reply)
        return reply.text


class _Agent:
    """One participant: a system instruction and the conversation so far."""

    def __init__(self, t: _ChatTally, instruction: str, role: str,
                 history: Sequence[Message] = ()) -> None:
        self.t, self.instruction, self.role = t, instruction, role
        self.messages = [Message(role="system", content=instruction), *history]

    def chat(self, text: str, temperature: float = CHAT_TEMPERATURE) -> str:
        self.messages.append(Message(role="user", content=text))
        reply = self.t.converse(self.messages, temperature)
        self.messages.append(Message(role="assistant", content=reply))
        return reply

    def prime(self) -> str:
        """The paper's first call of every agent: its own instruction as a user message."""
        return self.chat(self.instruction)


def _ask_each(agents: Sequence[_Agent], text: Callable[[_Agent], str],
              temperature: float = CHAT_TEMPERATURE) -> list[str]:
    """One message to each agent, concurrently (each agent's conversation is its own)."""
    return gather([functools.partial(a.chat, text(a), temperature) for a in agents])


def _options_line(options: dict[str, str], rng: random.Random) -> str:
    choices = [f"({k}) {v}" for k, v in options.items()]
    rng.shuffle(choices)
    return " ".join(choices)


def create_question(item: PublicQAItem, rng: random.Random, with_options: bool) -> str:
    """The paper's query: the question, then the options in a shuffled order (medqa only, unless
    ``with_options``)."""
    if item.dataset != "medqa" and not with_options:
        return item.question
    return f"{item.question} Options: {_options_line(item.options, rng)}"


def _shuffled_exemplars(ctx: MethodContext, rng: random.Random) -> list[Exemplar]:
    shots = list(ctx.exemplars)
    rng.shuffle(shots)
    return shots[:5]


def _basic(t: _ChatTally, item: PublicQAItem, question: str, ctx: MethodContext,
           rng: random.Random) -> str:
    helper = _Agent(t, HELPER, "medical expert")
    history: list[Message] = []
    if item.dataset == "medqa":
        for ex in _shuffled_exemplars(ctx, rng):
            shot = f"{ex.question} {_options_line(ex.options, rng)}"
            answer = f"Answer: ({ex.answer_idx}) {ex.options.get(ex.answer_idx, '')}\n\n"
            reason = helper.chat(f"{HELPER} " + RATIONALE.format(question=shot, answer=answer))
            history += [Message(role="user", content=shot),
                        Message(role="assistant", content=f"{answer}\n\n{reason}")]
    single = _Agent(t, SINGLE, "medical expert", history)
    single.prime()
    return single.chat("The following are multiple choice questions (with answers) about medical "
                       f"knowledge. Let's think step by step.\n\n**Question:** {question}\n"
                       "Answer: ", temperature=0.0)


def _intermediate(t: _ChatTally, item: PublicQAItem, question: str, ctx: MethodContext,
                  rng: random.Random) -> tuple[str, dict[str, str]]:
    recruiter = _Agent(t, RECRUITER, "recruiter")
    recruiter.prime()
    recruited = recruiter.chat(
        f"Question: {question}\nYou can recruit {N_EXPERTS} experts in different medical "
        "expertise. Considering the medical question and the options for the answer, what kind of "
        "experts will you recruit to better make an accurate answer?\nAlso, you need to specify "
        "the communication structure between experts (e.g., Pulmonologist == Neonatologist == "
        "Medical Geneticist == Pediatrician > Cardiologist), or indicate if they are independent."
        "\n\nFor example, if you want to recruit five experts, you answer can be like:\n1. "
        "Pediatrician - Specializes in the medical care of infants, children, and adolescents. - "
        "Hierarchy: Independent\n2. Cardiologist - Focuses on the diagnosis and treatment of heart "
        "and blood vessel-related conditions. - Hierarchy: Pediatrician > Cardiologist\n3. "
        "Pulmonologist - Specializes in the diagnosis and treatment of respiratory system "
        "disorders. - Hierarchy: Independent\n4. Neonatologist - Focuses on the care of newborn "
        "infants, especially those who are born prematurely or have medical issues at birth. - "
        "Hierarchy: Independent\n5. Medical Geneticist - Specializes in the study of genes and "
        "heredity. - Hierarchy: Independent\n\nPlease answer in above format, and do not include "
        "your reason.")
    found = parse_experts(recruited)
    roster = "".join(f"Agent {i + 1}: {role} - {desc}\n" for i, (role, desc) in enumerate(found))
    experts = [_Agent(t, f"You are a {role} who {desc}. Your job is to collaborate with other "
                         "medical experts in a team.", role) for role, desc in found]
    gather([e.prime for e in experts])
    by_role = {e.role: e for e in experts}  # the paper keys opinions by role
    shots = ""
    if item.dataset == "medqa":
        for i, ex in enumerate(_shuffled_exemplars(ctx, rng)):
            shot = f"[Example {i + 1}]\n{ex.question} {_options_line(ex.options, rng)}"
            answer = f"Answer: ({ex.answer_idx}) {ex.options.get(ex.answer_idx, '')}"
            reason = recruiter.chat(RATIONALE.format(question=shot, answer=answer))
            shots += f"{shot}\n{answer}\n{reason}\n\n"
    opinions = dict(zip(by_role, _ask_each(list(by_role.values()), lambda _: (
        "Given the examplers, please return your answer to the medical query among the option "
        f"provided.\n\n{shots}\n\nQuestion: {question}\n\nYour answer should be like below "
        "format.\n\nAnswer: ")), strict=True))
    rounds = 0
    for n in range(1, ROUNDS + 1):
        rounds = n
        assessment = "".join(f"({k}): {v}\n" for k, v in opinions.items()) if n == 1 else ""
        synthesizer = _Agent(t, SYNTHESIZER, "medical assistant")
        synthesizer.prime()
        synthesizer.chat(
            f"Here are some reports from different medical domain experts.\n\n{assessment}\n\nYou "
            "need to complete the following steps\n1. Take careful and comprehensive consideration "
            "of the following reports.\n2. Extract key knowledge from the following reports.\n3. "
            "Derive the comprehensive and summarized analysis based on the knowledge\n4. Your "
            "ultimate goal is to derive a refined and synthesized report based on the following "
            "reports.\n\nYou should output in exactly the same format as: Key Knowledge:; Total "
            "Analysis:")
        if not _debate_round(experts, roster, assessment if n == 1 else None):
            break
    finals = dict(zip([e.role for e in experts], _ask_each(experts, lambda _: (
        "Now that you've interacted with other medical experts, remind your expertise and the "
        f"comments from other experts and make your final answer to the given question:\n"
        f"{question}\nAnswer: ")), strict=True))
    moderator = _Agent(t, MODERATOR, "Moderator")
    moderator.prime()
    decision = moderator.chat(
        "Given each agent's final answer, please review each agent's opinion and make the final "
        "answer to the question by taking majority vote. Your answer should be like below format:"
        f"\nAnswer: C) 2th pharyngeal arch\n{finals}\n\nQuestion: {question}", temperature=0.0)
    return decision, {"experts": str(len(experts)), "rounds": str(rounds)}


def _debate_round(experts: Sequence[_Agent], roster: str, assessment: str | None) -> bool:
    """Up to :data:`TURNS` turns; False when a turn had nobody who wanted to talk (the debate
    ends), True when every turn had someone."""
    n = len(experts)
    for _ in range(TURNS):
        sent: dict[int, dict[int, str]] = {i: {} for i in range(1, n + 1)}

        def speak(idx: int, sent: dict[int, dict[int, str]] = sent) -> bool:
            expert = experts[idx - 1]
            seen = assessment if assessment is not None else "".join(
                f"Agent {src} -> Agent {idx}: {sent[src].get(idx)}\n" for src in range(1, n + 1))
            wants = expert.chat("Given the opinions from other medical experts in your team, "
                                "please indicate whether you want to talk to any expert (yes/no)"
                                f"\n\nOpinions:\n{seen}")
            if "yes" not in wants.lower().strip():
                return False
            chosen = expert.chat(
                f"Enter the number of the expert you want to talk to:\n{roster}\nFor example, if "
                "you want to talk with Agent 1. Pediatrician, return just 1. If you want to talk "
                "with more than one expert, please return 1,2 and don't return the reasons.")
            for target in [int(c) for c in chosen.replace(".", ",").split(",")
                           if c.strip().isdigit() and 1 <= int(c) <= n]:
                sent[idx][target] = expert.chat(
                    "Please remind your medical expertise and then leave your opinion to an "
                    f"expert you chose (Agent {target}. {experts[target - 1].role}). You should "
                    "deliver your opinion once you are confident enough and in a way to convince "
                    "other expert with a short reason.")
            return True

        if assessment is not None:  # round 1: everyone sees the same opinions
            said = gather([functools.partial(speak, i) for i in range(1, n + 1)])
        else:
            said = [speak(i) for i in range(1, n + 1)]
        if not any(said):
            return False
    return True


class _Team:
    """An MDT: its goal and primed members; ``interact`` is the paper's internal discussion."""

    def __init__(self, t: _ChatTally, goal: str, members: list[tuple[str, str]],
                 question: str) -> None:
        self.goal, self.question = goal, question
        self.members = [_Agent(t, f"You are a {role} who {expertise.lower()}.", role)
                        for role, expertise in members]

    def interact(self) -> str:
        leads = [m for m in self.members if "lead" in m.role.lower()]
        assistants = [m for m in self.members if "lead" not in m.role.lower()]
        lead = leads[-1] if leads else assistants[0]
        delivery = lead.chat(
            f"You are the lead of the medical group which aims to {self.goal}. You have the "
            "following assistant clinicians who work for you:"
            + "".join(f"\n{a.role}" for a in assistants)
            + "\n\nNow, given the medical query, provide a short answer to what kind "
            f"investigations are needed from each assistant clinicians.\nQuestion: {self.question}")
        reports = _ask_each(assistants, lambda _: (
            f"You are in a medical group where the goal is to {self.goal}. Your group lead is "
            f"asking for the following investigations:\n{delivery}\n\nPlease remind your "
            "expertise and return your investigation summary that contains the core information."))
        gathered = "".join(f"[{a.role}]\n{r}\n" for a, r in zip(assistants, reports, strict=True))
        return lead.chat(f"The gathered investigation from your asssitant clinicians is as "
                         f"follows:\n{gathered}.\n\nNow, return your answer to the medical query "
                         f"among the option provided.\n\nQuestion: {self.question}")


def _advanced(t: _ChatTally, question: str) -> tuple[str, dict[str, str]]:
    recruiter = _Agent(t, MDT_RECRUITER, "recruiter")
    recruiter.prime()
    recruited = recruiter.chat(
        f"Question: {question}\n\nYou should organize {N_TEAMS} MDTs with different specialties or "
        f"purposes and each MDT should have {N_MEMBERS} clinicians. Considering the medical "
        "question and the options, please return your recruitment plan to better make an accurate "
        "answer.\n\nFor example, the following is an example answer:\nGroup 1 - Initial Assessment"
        " Team (IAT)\nMember 1: Otolaryngologist (ENT Surgeon) (Lead) - Specializes in ear, nose, "
        "and throat surgery, including thyroidectomy.\nMember 2: General Surgeon - Provides "
        "additional surgical expertise.\nMember 3: Anesthesiologist - Focuses on perioperative "
        "care.\n\nGroup 2 - Diagnostic Evidence Team (DET)\nMember 1: Endocrinologist (Lead) - "
        "Oversees the long-term management of Graves' disease.\nMember 2: Speech-Language "
        "Pathologist - Specializes in voice and swallowing disorders.\nMember 3: Neurologist - "
        "Assesses and advises on nerve damage.\n\nGroup 3 - Final Review and Decision Team (FRDT)"
        "\nMember 1: Senior Consultant from each specialty (Lead) - Provides overarching expertise "
        "and guidance in decision\nMember 2: Clinical Decision Specialist - Coordinates the "
        "different recommendations from the various teams.\nMember 3: Advanced Diagnostic Support "
        "- Utilizes advanced diagnostic tools and techniques.\n\nAbove is just an example, thus, "
        "you should organize your own unique MDTs but you should include Initial Assessment Team "
        "(IAT) and Final Review and Decision Team (FRDT) in your recruitment plan. When you return "
        "your answer, please strictly refer to the above format without any markdown symbols.")
    teams = [_Team(t, goal, members, question) for goal, members in parse_teams(recruited)]
    gather([m.prime for team in teams for m in team.members])
    first = [tm for tm in teams if INITIAL.search(tm.goal)]
    rest = [tm for tm in teams if not INITIAL.search(tm.goal)]
    answers = gather([tm.interact for tm in [*first, *rest]])
    gather([tm.interact for tm in teams if REVIEW.search(tm.goal)])  # the FRDT again (unused)
    report = "".join(f"Group {i + 1} - {tm.goal}\n{answer}\n\n"
                     for i, (tm, answer) in enumerate(zip(first, answers, strict=False)))
    decider = _Agent(t, DECIDER, "Decision Maker")
    decider.prime()
    decision = decider.chat(f"Investigation:\n{report}\n\nQuestion: {question}", temperature=0.0)
    return decision, {"teams": str(len(teams)), "initial_teams": str(len(first))}


def _mdagents(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
              with_options: bool) -> MethodResult:
    t = _ChatTally(model, complete)
    rng = random.Random(f"mdagents:{ctx.seed}:{item.dataset}:{item.realidx}")
    question = create_question(item, rng, with_options)
    assessor = _Agent(t, ASSESSOR, "medical expert")
    assessor.prime()
    route = route_of(assessor.chat(
        "Now, given the medical query as below, you need to decide the difficulty/complexity of "
        f"it:\n{question}.\n\nPlease indicate the difficulty/complexity of the medical query among "
        "below options:\n1) basic: a single medical agent can output an answer.\n2) intermediate: "
        "number of medical experts with different expertise should dicuss and make final decision."
        "\n3) advanced: multiple teams of clinicians from different departments need to "
        "collaborate with each other to make final decision."))
    trace: dict[str, str] = {}
    if route == "basic":
        decision = _basic(t, item, question, ctx, rng)
    elif route == "intermediate":
        decision, trace = _intermediate(t, item, question, ctx, rng)
    else:
        decision, trace = _advanced(t, question)
    found = t.extract(decision, item.options, ctx)
    return t.finish(found, decision, {"route": route, **trace})


@METHODS.register("mdagents")
def mdagents(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
             ) -> MethodResult:
    """MDAgents as the paper ran it (options shown on medqa only); see the module docstring."""
    return _mdagents(item, model, complete, ctx, with_options=False)


@METHODS.register("mdagents_options")
def mdagents_options(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
                     ) -> MethodResult:
    """MDAgents with the options shown on every dataset (not the paper's published runs)."""
    return _mdagents(item, model, complete, ctx, with_options=True)
