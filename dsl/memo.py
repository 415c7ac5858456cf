"""Memos kept for the life of the process (a rule author's check loop, the MCP server, the
test suite build many KBs from the same parsed files). Each is bounded: when full it is
forgotten all at once, so a long run of one-off inputs stays small."""

from __future__ import annotations


class Kept(dict):
    """A dict of at most `limit` entries, keyed by value."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def keep(self, key, value):
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


class ByIdentity:
    """Values per object, by identity. An entry keeps its object alive, so an id is never
    reused while the entry stands."""

    def __init__(self, limit: int):
        self._kept = Kept(limit)

    def get(self, obj, default=None):
        found = self._kept.get(id(obj))
        return found[1] if found is not None and found[0] is obj else default

    def keep(self, obj, value):
        self._kept.keep(id(obj), (obj, value))
        return value
