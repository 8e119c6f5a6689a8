"""Agent-track builders over generated patient records and documents
(:mod:`tasks_lib.medbench.agent_world`; seeded, no real person, not MedBench data):

* ``agent_decomp`` (MedDecomp): decompose "start IV vancomycin safely" for a patient; the plan
  looks up allergies and creatinine, computes the clearance and the loading dose;
* ``agent_pathplan`` (MedPathPlan): the hyperkalaemia pathway of a patient whose potassium is
  high (found with the tools);
* ``agent_callapi`` (MedCallAPI) and ``agent_dbops`` (MedDBOps): scored by tool-call micro-F1
  (the reference plan's calls; SQL compared by its result);
* ``agent_longqa`` (MedLongQA): a 30-day chart (90 shift notes) read with the document tool,
  single choice;
* ``agent_longconv`` (MedLongConv): a simulated user states facts early in a six-turn talk
  and asks about them at the end (open-ended).
"""

from __future__ import annotations

from typing import Any

from tasks_lib.medbench.agent_tools import TOOLS
from tasks_lib.medbench.agent_types import (
    AgentKey,
    AgentWorld,
    Document,
    Patient,
    ToolCall,
)
from tasks_lib.medbench.agent_world import cohort, patient, rng_for
from tasks_lib.medbench.bank import BUILDERS, BuiltTask, choice_items, open_item
from tasks_lib.medbench.bank_agent import tool_item, with_agent
from tasks_lib.medbench.items import PublicItem, Reference
from tasks_lib.sources import MedBenchSource
from tasks_lib.taskspec import TaskSpec

TOOL_SCHEMA = ("Call the tools the task needs; your tool calls are the answer (scored as "
               "[tool, arguments] tuples by micro-F1), then reply with the result in one line.")
SOURCE = "generated patient records (seeded; no real person; not MedBench data)"


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def _run(world: AgentWorld, call: ToolCall) -> Any:
    return TOOLS.get(call.name).run(world, call.arguments)


def _latest(p: Patient, test: str) -> float:
    return next(lab.value for lab in reversed(p.labs) if lab.test == test)


def _renal(world: AgentWorld, p: Patient) -> tuple[ToolCall, float]:
    call = _call("creatinine_clearance", age=p.age, weight_kg=p.weight_kg,
                 serum_creatinine_mg_dl=_latest(p, "creatinine"), sex=p.sex)
    return call, float(_run(world, call)["crcl_ml_min"])


Built = tuple[list[PublicItem], list[Reference]]


def _open(task: TaskSpec, src: MedBenchSource, qid: str, prompt: str, gold: str,
          points: list[str], key: AgentKey, context: dict[str, str]) -> Built:
    pi, pr = open_item(task, src, qid, prompt, gold, points, src.specialty)
    return with_agent(task, src, [pi], [pr], key, context)


def _collect(parts: list[Built], source: str) -> BuiltTask:
    return BuiltTask([i for p in parts for i in p[0]], [r for p in parts for r in p[1]], {},
                     source)


@BUILDERS.register("agent_decomp")
def agent_decomp(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedDecomp: ordered sub-tasks of starting IV vancomycin, done with the tools."""
    parts = []
    for i in range(1, src.n_items + 1):
        p = patient(src.seed, task.task_id, i, allergy="penicillin" if i % 2 else "sulfonamides")
        world = AgentWorld(patients=[p])
        crcl_call, crcl = _renal(world, p)
        dose_call = _call("dose_calculator", dose_mg_per_kg=25, weight_kg=p.weight_kg,
                          max_dose_mg=3000)
        dose = _run(world, dose_call)["dose_mg"]
        gold = (f"1. Check allergies: {', '.join(p.allergies) or 'none recorded'}; no "
                f"vancomycin allergy. 2. Check renal function: latest creatinine "
                f"{_latest(p, 'creatinine')} mg/dL, creatinine clearance {crcl} mL/min. "
                f"3. Loading dose 25 mg/kg x {p.weight_kg} kg = {dose} mg. 4. Choose the "
                "maintenance interval by renal function and monitor the trough level before "
                "the fourth dose.")
        calls = [_call("get_patient", patient_id=p.patient_id),
                 _call("get_labs", patient_id=p.patient_id, test="creatinine"), crcl_call,
                 dose_call]
        prompt = (f"Goal: start intravenous vancomycin for patient {p.patient_id} (MRSA "
                  "cellulitis). Decompose the goal into ordered sub-tasks, carry out with the "
                  "tools the ones they allow, and give the plan with the numbers you found "
                  "(loading dose 25 mg/kg, at most 3,000 mg).")
        parts.append(_open(task, src, f"vanco-{i}", prompt, gold,
                           ["check allergies", "creatinine clearance", f"{dose} mg",
                            "trough level"], AgentKey(world=world, calls=calls, answer=gold),
                           {"patient_id": p.patient_id}))
    return _collect(parts, f"{SOURCE}; goal: start IV vancomycin")


@BUILDERS.register("agent_pathplan")
def agent_pathplan(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedPathPlan: the hyperkalaemia pathway of a patient with a high potassium."""
    parts = []
    for i in range(1, src.n_items + 1):
        k = round(6.0 + 0.3 * i, 1)
        p = patient(src.seed, task.task_id, i, labs={"potassium": k})
        world = AgentWorld(patients=[p])
        drugs = ", ".join(m.drug for m in p.medications)
        gold = (f"Potassium {k} mmol/L on days 1-3: hyperkalaemia. 1. 12-lead ECG now. 2. If "
                "the ECG shows changes give calcium gluconate 10% 10 mL IV. 3. Insulin with "
                "glucose (10 units with 25 g) and consider nebulised salbutamol. 4. Review the "
                f"drugs ({drugs}) and stop potassium-raising ones. 5. Repeat potassium in 2 "
                "hours and treat the cause.")
        calls = [_call("get_labs", patient_id=p.patient_id),
                 _call("get_medications", patient_id=p.patient_id)]
        prompt = (f"Patient {p.patient_id} has a new laboratory alert. Find the problem with "
                  "the tools, then plan the care pathway as ordered steps.")
        parts.append(_open(task, src, f"alert-{i}", prompt, gold,
                           ["hyperkalaemia", "ECG", "calcium gluconate", "insulin with glucose",
                            "repeat potassium"], AgentKey(world=world, calls=calls, answer=gold),
                           {"patient_id": p.patient_id}))
    return _collect(parts, f"{SOURCE}; forced potassium 6.3-{6.0 + 0.3 * src.n_items:.1f} "
                           "mmol/L")


def _callapi(kind: int, world: AgentWorld, p: Patient) -> tuple[str, list[ToolCall], str]:
    pid = p.patient_id
    if kind == 0:
        return (f"Using the clinical APIs, retrieve the potassium results of patient {pid} and "
                "report the latest value.",
                [_call("get_labs", patient_id=pid, test="potassium")],
                f"Latest potassium: {_latest(p, 'potassium')} mmol/L.")
    if kind == 1:
        dose = _call("dose_calculator", dose_mg_per_kg=15, weight_kg=p.weight_kg,
                     max_dose_mg=2000)
        return (f"Calculate a vancomycin maintenance dose of 15 mg/kg (at most 2,000 mg) for "
                f"patient {pid} using the APIs.", [_call("get_patient", patient_id=pid), dose],
                f"Dose: {_run(world, dose)['dose_mg']} mg.")
    if kind == 2:
        crcl_call, crcl = _renal(world, p)
        return (f"Estimate the creatinine clearance of patient {pid} from the latest creatinine "
                "with the APIs.", [_call("get_patient", patient_id=pid),
                                   _call("get_labs", patient_id=pid, test="creatinine"),
                                   crcl_call], f"Creatinine clearance: {crcl} mL/min.")
    return (f"List the active medications of patient {pid} and check them against the recorded "
            "allergies.", [_call("get_medications", patient_id=pid),
                           _call("get_patient", patient_id=pid)],
            f"Medications: {', '.join(m.drug for m in p.medications)}; allergies: "
            f"{', '.join(p.allergies) or 'none'}.")


@BUILDERS.register("agent_callapi")
def agent_callapi(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedCallAPI: retrieve labs, compute a dose or a clearance, check medications."""
    patients = cohort(src.seed, task.task_id, src.n_items + 1)
    world = AgentWorld(patients=patients)
    parts = []
    for i in range(src.n_items):
        p = patients[i]
        prompt, calls, answer = _callapi(i % 4, world, p)
        key = AgentKey(world=world, calls=calls, answer=answer)
        parts.append(tool_item(task, src, f"api-{i + 1}", prompt, key,
                               {"patient_id": p.patient_id}, TOOL_SCHEMA))
    return _collect(parts, f"{SOURCE}; {len(patients)} records per item")


DB_QUESTIONS = [
    ("Which patients had a potassium above 5.5 mmol/L on any day?",
     "SELECT DISTINCT patient_id FROM labs WHERE test = 'potassium' AND value > 5.5"),
    ("How many patients take furosemide?",
     "SELECT COUNT(DISTINCT patient_id) FROM medications WHERE drug = 'furosemide'"),
    ("Which patients older than 60 have a recorded drug allergy, and to what?",
     "SELECT p.patient_id, a.drug FROM patients p JOIN allergies a "
     "ON a.patient_id = p.patient_id WHERE p.age > 60"),
    ("What is the mean day-1 sodium over all patients (1 decimal)?",
     "SELECT ROUND(AVG(value), 1) FROM labs WHERE test = 'sodium' AND day = 1"),
]
"""MedDBOps questions and the reference query (compared by its result)."""


@BUILDERS.register("agent_dbops")
def agent_dbops(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedDBOps: questions over a clinical database of 8 generated records (read-only SQL)."""
    patients = [patient(src.seed, task.task_id, i, labs={"potassium": 5.9} if i in (2, 5)
                        else None) for i in range(1, 9)]
    world = AgentWorld(patients=patients)
    parts = []
    for i, (question, sql) in enumerate(DB_QUESTIONS[:src.n_items], 1):
        call = _call("sql_query", sql=sql)
        rows = _run(world, call)["rows"]
        key = AgentKey(world=world, calls=[call], answer=f"Result: {rows}")
        prompt = (f"Using the clinical database (read-only SQL; tables: patients, labs, "
                  f"medications, allergies, diagnoses), answer: {question}")
        parts.append(tool_item(task, src, f"db-{i}", prompt, key, {}, TOOL_SCHEMA))
    return _collect(parts, f"{SOURCE}; 8 records as SQLite tables built for each query")


LONG_GOLD = ["levofloxacin", "doxycycline", "aztreonam"]
LONG_OTHER = ["ceftriaxone", "meropenem", "vancomycin", "azithromycin"]
SHIFTS = ["morning round", "afternoon review", "night nursing note"]
STATES = ["afebrile", "comfortable", "mobilising with a frame", "eating well", "slept well",
          "mild cough", "pain controlled with paracetamol", "bowels open"]
PLANS = ["continue current care", "physiotherapy", "review bloods tomorrow",
         "encourage oral fluids", "occupational therapy assessment", "no change"]


def _chart(seed: int, task_id: str, i: int, gold: str) -> tuple[str, str]:
    """A 30-day ward chart (90 shift notes, about 1,700 words): ceftriaxone from day ``a``, a
    rash, then ``gold`` to discharge; meropenem discussed and not given; routine notes around
    them. Returns (doc_id, text)."""
    r = rng_for(seed, task_id, f"chart{i}")
    start, switch = r.randint(3, 9), r.randint(12, 20)
    notes = []
    for day in range(1, 31):
        for shift in SHIFTS:
            hr, sbp, dia = r.randint(62, 98), r.randint(104, 146), r.randint(60, 90)
            line = (f"Day {day}, {shift}: HR {hr}, BP {sbp}/{dia}, SpO2 {r.randint(93, 99)}%, "
                    f"temperature {r.randint(361, 378) / 10} C; {r.choice(STATES)}. Plan: "
                    f"{r.choice(PLANS)}.")
            if shift == SHIFTS[0] and day == start:
                line += " Fever and cough: started ceftriaxone for pneumonia."
            if shift == SHIFTS[1] and day == start + 2:
                line += " Team discussed escalating to meropenem; not started as she improved."
            if shift == SHIFTS[2] and day == switch:
                line += f" Rash on the trunk: ceftriaxone stopped, switched to {gold}."
            notes.append(line)
    notes.append(f"Discharge: home on oral {gold} to complete the course.")
    return f"chart-{i}", "\n".join(notes)


@BUILDERS.register("agent_longqa")
def agent_longqa(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedLongQA: which antibiotic at discharge, from a 30-day chart read with the tools."""
    parts = []
    for i in range(1, src.n_items + 1):
        gold = LONG_GOLD[(i - 1) % len(LONG_GOLD)]
        doc_id, text = _chart(src.seed, task.task_id, i, gold)
        options = dict(zip("ABCDE", sorted([gold, *LONG_OTHER]), strict=True))
        answer = next(k for k, v in options.items() if v == gold)
        prompt = (f"Read the ward chart {doc_id} with the document tools. Which antibiotic was "
                  "the patient taking at discharge?")
        items, refs = choice_items(task, src, f"chart-{i}", prompt, options, answer,
                                   src.specialty)
        world = AgentWorld(documents=[Document(doc_id=doc_id, title="Ward chart", text=text)])
        key = AgentKey(world=world, calls=[_call("read_document", doc_id=doc_id)])
        items, refs = with_agent(task, src, items, refs, key, {"doc_id": doc_id})
        refs = [r.model_copy(update={"agent": key.model_copy(update={
            "answer": f"Answer: {r.letter}"})}) for r in refs]
        parts.append((items, refs))
    return _collect(parts, "generated 30-day ward charts (seeded; not MedBench data)")


CHATTER = ["My knee has been sore since last week's walk.",
           "I have been sleeping badly, maybe five hours a night.",
           "The pharmacy measured my blood pressure at 138/84.",
           "I am also trying to drink more water these days.",
           "My daughter says I should walk every morning."]
DAILY = ["warfarin", "apixaban", "clopidogrel"]
ALLERGIC = ["penicillin", "clindamycin", "erythromycin"]


@BUILDERS.register("agent_longconv")
def agent_longconv(task: TaskSpec, src: MedBenchSource) -> BuiltTask:
    """MedLongConv: facts said in turn 2 of 6, asked about in turn 6 (simulated user)."""
    parts = []
    for i in range(1, src.n_items + 1):
        r = rng_for(src.seed, task.task_id, f"talk{i}")
        drug, allergy, age = r.choice(DAILY), r.choice(ALLERGIC), r.randint(55, 80)
        turns = [f"Some background first: I am {age}, I take {drug} every day, and I am "
                 f"allergic to {allergy}.", *r.sample(CHATTER, 3),
                 "Now, remembering what I told you at the start: which daily medicine must my "
                 "dentist know about, and which antibiotic must they avoid?"]
        gold = (f"Tell the dentist that you take {drug} every day (bleeding risk: they will plan "
                f"around it), and that they must avoid {allergy} because of your allergy.")
        key = AgentKey(world=AgentWorld(user_turns=turns), answer=gold)
        prompt = ("Hello, I would like some advice over a few messages before my dental "
                  "appointment next week.")
        parts.append(_open(task, src, f"talk-{i}", prompt, gold, [drug, allergy], key, {}))
    return _collect(parts, "generated six-turn patient conversations (seeded; not MedBench "
                           "data)")
