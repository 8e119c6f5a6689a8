"""Agent execution harness: the tool-calling loop, scripted agents, traces, judges glue, the cell
steps that turn one (agent, task, tier, replicate) into a stored run (submission + trace + run
record), and :mod:`~tasks_lib.harness.rescore`, which scores such a run from storage alone."""
