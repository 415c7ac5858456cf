"""Benchmarks: figures measured as ratios against baselines run in the same process."""
