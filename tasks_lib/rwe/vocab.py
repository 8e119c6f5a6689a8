"""Vocabulary of the synthetic EHR: ICD codes with titles, lab items, drugs (hand-checked).

Codes are stored as MIMIC-IV stores them (no dot; ``icd_code CHAR(7)``). Every concept has an
ICD-9 and an ICD-10 code: a stay whose hidden real date is before 2015-10-01 is coded in ICD-9.
Titles are the CMS long titles of these codes (a small hand-checked list: no ICD package is
installed here; see the report).
"""

from __future__ import annotations

from typing import NamedTuple


class Code(NamedTuple):
    """One diagnosis or procedure code."""

    code: str
    version: int
    title: str


DIAGNOSES: dict[str, tuple[list[Code], list[Code]]] = {
    "sepsis": ([Code("0389", 9, "Unspecified septicemia"),
                Code("99592", 9, "Severe sepsis")],
               [Code("A419", 10, "Sepsis, unspecified organism"),
                Code("R6520", 10, "Severe sepsis without septic shock")]),
    "hypertension": ([Code("4019", 9, "Unspecified essential hypertension")],
                     [Code("I10", 10, "Essential (primary) hypertension")]),
    "heart_failure": ([Code("4280", 9, "Congestive heart failure, unspecified"),
                       Code("42822", 9, "Chronic systolic heart failure"),
                       Code("42832", 9, "Chronic diastolic heart failure")],
                      [Code("I509", 10, "Heart failure, unspecified"),
                       Code("I5022", 10, "Chronic systolic (congestive) heart failure"),
                       Code("I5032", 10, "Chronic diastolic (congestive) heart failure")]),
    "pancreatitis": ([Code("5770", 9, "Acute pancreatitis")],
                     [Code("K859", 10, "Acute pancreatitis, unspecified"),
                      Code("K851", 10, "Biliary acute pancreatitis"),
                      Code("K852", 10, "Alcohol induced acute pancreatitis")]),
    "ich": ([Code("431", 9, "Intracerebral hemorrhage")],
            [Code("I619", 10, "Nontraumatic intracerebral hemorrhage, unspecified"),
             Code("I618", 10, "Other nontraumatic intracerebral hemorrhage")]),
    "traumatic_ich": ([Code("85200", 9, "Subarachnoid hemorrhage following injury without "
                                        "mention of open intracranial wound, unspecified state "
                                        "of consciousness")],
                      [Code("S065X0A", 10, "Traumatic subdural hemorrhage without loss of "
                                           "consciousness, initial encounter"),
                       Code("S066X0A", 10, "Traumatic subarachnoid hemorrhage without loss of "
                                           "consciousness, initial encounter")]),
    "influenza": ([Code("4871", 9, "Influenza with other respiratory manifestations"),
                   Code("4878", 9, "Influenza with other manifestations")],
                  [Code("J111", 10, "Influenza due to unidentified influenza virus with other "
                                    "respiratory manifestations"),
                   Code("J101", 10, "Influenza due to other identified influenza virus with "
                                    "other respiratory manifestations")]),
    "esrd": ([Code("5856", 9, "End stage renal disease")],
             [Code("N186", 10, "End stage renal disease")]),
}
"""Study concepts → (ICD-9 codes, ICD-10 codes)."""

BACKGROUND: list[tuple[Code, Code]] = [
    (Code("25000", 9, "Diabetes mellitus without mention of complication, type II or unspecified "
                      "type, not stated as uncontrolled"),
     Code("E119", 10, "Type 2 diabetes mellitus without complications")),
    (Code("5859", 9, "Chronic kidney disease, unspecified"),
     Code("N189", 10, "Chronic kidney disease, unspecified")),
    (Code("42731", 9, "Atrial fibrillation"), Code("I4891", 10, "Unspecified atrial fibrillation")),
    (Code("496", 9, "Chronic airway obstruction, not elsewhere classified"),
     Code("J449", 10, "Chronic obstructive pulmonary disease, unspecified")),
    (Code("2724", 9, "Other and unspecified hyperlipidemia"),
     Code("E785", 10, "Hyperlipidemia, unspecified")),
    (Code("53081", 9, "Esophageal reflux"),
     Code("K219", 10, "Gastro-esophageal reflux disease without esophagitis")),
    (Code("311", 9, "Depressive disorder, not elsewhere classified"),
     Code("F329", 10, "Major depressive disorder, single episode, unspecified")),
    (Code("2859", 9, "Anemia, unspecified"), Code("D649", 10, "Anemia, unspecified")),
    (Code("5990", 9, "Urinary tract infection, site not specified"),
     Code("N390", 10, "Urinary tract infection, site not specified")),
    (Code("2449", 9, "Unspecified acquired hypothyroidism"),
     Code("E039", 10, "Hypothyroidism, unspecified")),
    (Code("486", 9, "Pneumonia, organism unspecified"),
     Code("J189", 10, "Pneumonia, unspecified organism")),
    (Code("41401", 9, "Coronary atherosclerosis of native coronary artery"),
     Code("I2510", 10, "Atherosclerotic heart disease of native coronary artery without angina "
                       "pectoris")),
]
"""Comorbidity codes drawn at random (never a study concept)."""

PROCEDURES: list[tuple[Code, Code]] = [
    (Code("9672", 9, "Continuous invasive mechanical ventilation for 96 consecutive hours or "
                     "more"),
     Code("5A1955Z", 10, "Respiratory Ventilation, Greater than 96 Consecutive Hours")),
    (Code("3995", 9, "Hemodialysis"),
     Code("5A1D70Z", 10, "Performance of Urinary Filtration, Intermittent, Less than 6 Hours Per "
                         "Day")),
    (Code("3893", 9, "Venous catheterization, not elsewhere classified"),
     Code("02HV33Z", 10, "Insertion of Infusion Device into Superior Vena Cava, Percutaneous "
                         "Approach")),
]
"""Procedure codes drawn at random."""


class LabItem(NamedTuple):
    """One ``d_labitems`` row plus generation defaults."""

    itemid: int
    label: str
    fluid: str
    category: str
    uom: str
    low: float
    high: float
    """Reference range (also the default value range of background draws)."""


LABS: dict[str, LabItem] = {
    "creatinine": LabItem(50912, "Creatinine", "Blood", "Chemistry", "mg/dL", 0.5, 1.2),
    "lactate": LabItem(50813, "Lactate", "Blood", "Blood Gas", "mmol/L", 0.5, 2.0),
    "albumin": LabItem(50862, "Albumin", "Blood", "Chemistry", "g/dL", 3.5, 5.2),
    "wbc": LabItem(51301, "White Blood Cells", "Blood", "Hematology", "K/uL", 4.0, 11.0),
    "platelets": LabItem(51265, "Platelet Count", "Blood", "Hematology", "K/uL", 150.0, 440.0),
    "glucose": LabItem(50931, "Glucose", "Blood", "Chemistry", "mg/dL", 70.0, 100.0),
    "sodium": LabItem(50983, "Sodium", "Blood", "Chemistry", "mEq/L", 133.0, 145.0),
    "potassium": LabItem(50971, "Potassium", "Blood", "Chemistry", "mEq/L", 3.3, 5.1),
    "bun": LabItem(51006, "Urea Nitrogen", "Blood", "Chemistry", "mg/dL", 6.0, 20.0),
    "bilirubin": LabItem(50885, "Bilirubin, Total", "Blood", "Chemistry", "mg/dL", 0.0, 1.5),
    "inr": LabItem(51237, "INR(PT)", "Blood", "Hematology", "", 0.9, 1.1),
    "neutrophils_pct": LabItem(51256, "Neutrophils", "Blood", "Hematology", "%", 50.0, 70.0),
    "lymphocytes_pct": LabItem(51244, "Lymphocytes", "Blood", "Hematology", "%", 18.0, 42.0),
    "abs_neutrophils": LabItem(52075, "Absolute Neutrophil Count", "Blood", "Hematology", "K/uL",
                               1.6, 6.1),
    "abs_lymphocytes": LabItem(51133, "Absolute Lymphocyte Count", "Blood", "Hematology", "K/uL",
                               1.2, 3.7),
    "abs_lymphocytes_n": LabItem(52769, "Absolute Lymphocyte Count", "Blood", "Hematology",
                                 "#/uL", 1200.0, 3700.0),
    "albumin_ascites": LabItem(990050, "Albumin", "Ascites", "Chemistry", "g/dL", 0.0, 0.0),
}
"""Lab items by short name (real MIMIC-IV itemids; decoys ≥ 990000)."""

BACKGROUND_LABS = ["creatinine", "glucose", "sodium", "potassium", "bun", "wbc", "platelets",
                   "bilirubin", "inr"]
"""The panel drawn for every ICU stay (once in the first-day window, once on day 3)."""


class Drug(NamedTuple):
    """One drug as ``prescriptions`` names it."""

    drug: str
    formulary_drug_cd: str
    prod_strength: str
    dose: str
    unit: str
    route: str


DRUGS: dict[str, list[Drug]] = {
    "statin": [Drug("Atorvastatin", "ATOR40", "40mg Tablet", "40", "mg", "PO"),
               Drug("Simvastatin", "SIMV20", "20mg Tablet", "20", "mg", "PO"),
               Drug("Rosuvastatin Calcium", "ROSU10", "10mg Tablet", "10", "mg", "PO"),
               Drug("Pravastatin", "PRAV40", "40mg Tablet", "40", "mg", "PO")],
    "ppi": [Drug("Pantoprazole", "PANT40I", "40mg Vial", "40", "mg", "IV"),
            Drug("Omeprazole", "OMEP20", "20mg Capsule", "20", "mg", "PO"),
            Drug("Esomeprazole", "ESOM40", "40mg Capsule", "40", "mg", "PO")],
    "loop": [Drug("Furosemide", "FURO40I", "10mg/mL-4mL Vial", "40", "mg", "IV"),
             Drug("Bumetanide", "BUME1I", "0.25mg/mL-4mL Vial", "1", "mg", "IV"),
             Drug("Torsemide", "TORS20", "20mg Tablet", "20", "mg", "PO")],
    "antibiotic": [Drug("Vancomycin", "VANC1F", "1g Vial", "1000", "mg", "IV"),
                   Drug("Piperacillin-Tazobactam", "PIPT4I", "4.5g Vial", "4.5", "g", "IV"),
                   Drug("CefePIME", "CEFE2I", "2g Vial", "2", "g", "IV")],
    "background": [Drug("Acetaminophen", "ACET325", "325mg Tablet", "650", "mg", "PO"),
                   Drug("Heparin", "HEPA5I", "5000 Units / mL- 1mL Vial", "5000", "UNIT", "SC"),
                   Drug("Insulin", "INSULIN", "100 Units / mL - 10 mL Vial", "4", "UNIT", "SC"),
                   Drug("Ondansetron", "ONDA2I", "2mg/mL-2mL Vial", "4", "mg", "IV"),
                   Drug("Docusate Sodium", "DOCU100", "100mg Capsule", "100", "mg", "PO"),
                   Drug("Sodium Chloride 0.9%  Flush", "NACLFLUSH", "10 mL Syringe", "3", "mL",
                        "IV")],
}
"""Drug classes → the products ``prescriptions.drug`` names."""
