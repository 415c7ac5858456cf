"""The semantic core: the checked KB as a program the back ends evaluate (one
evaluator, one IR walker, per-query tables over value indices)."""
