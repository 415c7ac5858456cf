"""The audit on real projects (issue 22): the corpus in bench/data/real_projects,
its hand labels, and the scorer. `python -m bench.audit_real` runs it."""
