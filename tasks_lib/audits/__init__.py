"""The parts of the exploit audit (:mod:`tasks_lib.audit` runs them and gates publishing): the
report types, the audited pool and its data, kit scoring of null submissions, and one module per
check (null agents, answer key, grader tampering, judge injection, egress)."""
