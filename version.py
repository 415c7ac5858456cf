"""kbsolve's version, a leaf every layer may read (the KB cache's digest holds it)."""

__version__ = "0.1.0"
