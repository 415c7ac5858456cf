"""The results kbsolve answers, as data: the plan and the estimate
(results/plan.py, published as docs/plan.schema.json and docs/estimate.schema.json),
the audit report (results/audit.py), `fix`'s result (results/fix.py) and the deep
check's report (results/lint.py). A leaf: pydantic, the standard library and
kbsolve's other leaves only (tests/test_layers.py). The search, the plan builder,
the audit and the linter fill these models; render/, the api and the MCP server
read them."""
