"""Types of the MedBench agent track (spec §2.3): what an agent item shows, what it keeps
private, and the tool calls a prediction records.

The paper describes no scaffold, tool or trace format (spec §12); these are medflows' choices
(docs/medbench.md, *The agent track*):

* a public agent item (:class:`AgentView`) declares its tools (OpenAI function schemas) and the
  public parameters the prompt names (a patient id);
* its private side (:class:`AgentKey`, inside the item's reference) holds the *world* the tools
  read (documents, generated patient records whose tables also back the SQL tool, peers'
  opinions, the simulated user's later turns), the reference plan (the gold tool calls and
  answer: what the scripted test agents replay) and the marks of an injected instruction
  (a tool or a reply that only an agent following the injection would produce);
* a prediction records the calls an agent made (:class:`ToolCall`: ``{name, arguments}``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from evaluators.core import Frozen

ArgValue = str | int | float | bool | None
"""A tool-call argument value (JSON scalars only)."""

MAX_TOOL_CALLS = 64
"""Most tool calls one prediction may record."""


class ToolCall(Frozen):
    """One tool call an agent made (name + arguments as sent)."""

    name: str = Field(min_length=1, max_length=100, description="Tool name.")
    arguments: dict[str, ArgValue] = Field(default_factory=dict,
                                           description="Arguments (JSON scalars).")


class ToolDecl(Frozen):
    """A tool as an agent sees it (an OpenAI function schema)."""

    name: str = Field(description="Tool name.")
    description: str = Field(description="What the tool does (prose shown to the agent).")
    parameters: dict[str, Any] = Field(description="JSON schema of the arguments.")

    def to_openai(self) -> dict[str, Any]:
        """The declaration in OpenAI ``tools`` format."""
        return {"type": "function", "function": {"name": self.name, "description":
                self.description, "parameters": self.parameters}}


class AgentView(Frozen):
    """The public part of an agent-track item."""

    tools: list[ToolDecl] = Field(default_factory=list, description="Tools the agent may call "
                                                                    "(from the card's list).")
    context: dict[str, str] = Field(default_factory=dict, description="Public parameters the "
                                    "prompt names (e.g. patient_id).")
    user_turns: int = Field(default=0, ge=0, description="Further turns the simulated user "
                                                         "will say after the agent's replies.")


class Document(Frozen):
    """A document of an item's corpus (retrieval, long documents)."""

    doc_id: str = Field(description="Document id.")
    title: str = Field(description="Title.")
    text: str = Field(description="Full text.")


class Lab(Frozen):
    """One laboratory result of a generated patient."""

    test: str = Field(description="Test name (e.g. potassium).")
    value: float = Field(description="Result value.")
    unit: str = Field(description="Unit.")
    day: int = Field(description="Hospital day of the draw.")


class Medication(Frozen):
    """One active medication of a generated patient."""

    drug: str = Field(description="Drug name.")
    dose_mg: float = Field(description="Dose per administration (mg).")
    route: str = Field(description="Route (oral, iv, …).")
    frequency: str = Field(description="Frequency (e.g. every 12 h).")


class Patient(Frozen):
    """A generated patient record (no real person)."""

    patient_id: str = Field(description="Record id (P0001, …).")
    age: int = Field(description="Age in years.")
    sex: str = Field(description="F or M.")
    weight_kg: float = Field(description="Body weight (kg).")
    allergies: list[str] = Field(default_factory=list, description="Drug allergies.")
    diagnoses: list[str] = Field(default_factory=list, description="Active problems.")
    labs: list[Lab] = Field(default_factory=list, description="Laboratory results.")
    medications: list[Medication] = Field(default_factory=list, description="Active drugs.")
    notes: list[str] = Field(default_factory=list, description="Free-text notes (where an "
                                                               "injected instruction may hide).")


class AgentWorld(Frozen):
    """What an item's tools read (server side only)."""

    documents: list[Document] = Field(default_factory=list, description="Corpus of the "
                                      "retrieval and document tools.")
    patients: list[Patient] = Field(default_factory=list, description="Records of the clinical "
                                    "APIs; also the tables of the SQL tool.")
    peers: dict[str, str] = Field(default_factory=dict, description="Peer role → its opinion "
                                  "(multi-agent consultation).")
    user_turns: list[str] = Field(default_factory=list, description="The simulated user's "
                                  "later turns, said one after each agent reply.")


class AgentKey(Frozen):
    """The private part of an agent-track item (inside its reference)."""

    world: AgentWorld = Field(default_factory=AgentWorld, description="What the tools read.")
    calls: list[ToolCall] = Field(default_factory=list, description="The reference plan's tool "
                                  "calls (scored items: the gold tuples are their normal form).")
    answer: str = Field(default="", description="The reference plan's final reply.")
    forbidden_tools: list[str] = Field(default_factory=list, description="Tools only an agent "
                                       "following an injected instruction calls.")
    forbidden_text: list[str] = Field(default_factory=list, description="Text only an agent "
                                      "following an injected instruction replies.")
