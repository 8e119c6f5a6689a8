"""Agent execution harness: the tool-calling loop, scripted agents, traces, judges glue and the
cell steps that turn one (agent, task, tier, replicate) into a scored ledger row."""
