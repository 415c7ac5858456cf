"""kbsolve: a knowledge base and solver for training-run configurations."""

__version__ = "0.1.0"
