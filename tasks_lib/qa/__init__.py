"""Multiple-choice medical QA (MedAgentsBench): pools, agents and scoring."""
