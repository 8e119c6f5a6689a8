"""The parts of the exploit audit (:mod:`tasks_lib.audit` runs them and gates publishing): the
report types, the audited pool and its data, the baselines kits write for it
(:mod:`tasks_lib.audits.baselines`), kit scoring of submissions, and one module per check (null
agents, answer key, grader tampering, judge injection, egress)."""
