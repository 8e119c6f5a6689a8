"""Generated patient records for the agent track's clinical APIs and SQL tool (no real person).

A record is drawn from ``random.Random(sha256(seed|task|index))``: age 25–89, sex, weight 45–110
kg, 0–1 drug allergies, a few problems, a lab panel over hospital days 1–3 (creatinine,
potassium, sodium, haemoglobin, glucose, WBC) and 1–3 active drugs. The ranges are plausible
adult values, not a population model; a builder may force one abnormal value (e.g. potassium
6.2 mmol/L) to pose its question.
"""

from __future__ import annotations

import hashlib
import random

from tasks_lib.medbench.agent_types import Lab, Medication, Patient

PANEL = [("creatinine", "mg/dL", 0.6, 1.4, 2), ("potassium", "mmol/L", 3.5, 5.0, 1),
         ("sodium", "mmol/L", 135.0, 145.0, 0), ("haemoglobin", "g/dL", 11.5, 16.0, 1),
         ("glucose", "mmol/L", 4.0, 7.5, 1), ("wbc", "10^9/L", 4.0, 10.5, 1)]
"""(test, unit, low, high, decimals) of the generated panel."""
DRUGS = [("metformin", 500.0, "oral", "every 12 h"), ("amlodipine", 5.0, "oral", "daily"),
         ("atorvastatin", 20.0, "oral", "daily"), ("lisinopril", 10.0, "oral", "daily"),
         ("omeprazole", 20.0, "oral", "daily"), ("furosemide", 40.0, "oral", "daily"),
         ("spironolactone", 25.0, "oral", "daily"), ("apixaban", 5.0, "oral", "every 12 h")]
PROBLEMS = ["hypertension", "type 2 diabetes", "heart failure", "atrial fibrillation",
            "chronic kidney disease", "COPD", "community-acquired pneumonia", "cellulitis"]
ALLERGIES = ["penicillin", "sulfonamides", "cephalosporins", "vancomycin"]


def rng_for(seed: int, task_id: str, key: str) -> random.Random:
    """The seeded generator of one draw."""
    digest = hashlib.sha256(f"{seed}|{task_id}|{key}".encode()).hexdigest()
    return random.Random(int(digest, 16))


def patient(seed: int, task_id: str, index: int, labs: dict[str, float] | None = None,
            allergy: str | None = None, problems: list[str] | None = None) -> Patient:
    """Generated record ``P{index:04d}``; ``labs`` forces test values (every day), ``allergy``
    and ``problems`` replace the drawn ones."""
    r = rng_for(seed, task_id, f"patient{index}")
    age, sex = r.randint(25, 89), r.choice(["F", "M"])
    weight = round(r.uniform(45, 110), 1)
    drawn_allergy = [r.choice(ALLERGIES)] if r.random() < 0.5 else []
    drawn_problems = sorted(r.sample(PROBLEMS, r.randint(1, 3)))
    panel = []
    for day in (1, 2, 3):
        for test, unit, low, high, digits in PANEL:
            value = round(r.uniform(low, high), digits)
            if labs and test in labs:
                value = labs[test]
            panel.append(Lab(test=test, value=value, unit=unit, day=day))
    meds = [Medication(drug=d, dose_mg=dose, route=route, frequency=freq)
            for d, dose, route, freq in sorted(r.sample(DRUGS, r.randint(1, 3)))]
    return Patient(patient_id=f"P{index:04d}", age=age, sex=sex, weight_kg=weight,
                   allergies=[allergy] if allergy else drawn_allergy,
                   diagnoses=problems if problems is not None else drawn_problems,
                   labs=panel, medications=meds)


def cohort(seed: int, task_id: str, n: int) -> list[Patient]:
    """``n`` generated records ``P0001`` …"""
    return [patient(seed, task_id, i) for i in range(1, n + 1)]
