"""The trace oracle: real model code under FakeTensorMode (see __main__.py)."""
