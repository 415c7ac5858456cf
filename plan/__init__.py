"""From a search's outcome to the plan kbsolve answers: the orchestration of a
query (run.py: resolve, search, build), the plan's sections from the metrics
(report.py), each choice's explanation (explain.py), the runner-up plans
(alternatives.py) and the framework files a plan emits (emit.py,
emit_folder.py). Above the search (solver/) and the linked program (program/);
the plan's data models are results/plan.py."""
