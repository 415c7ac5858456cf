"""The dataclasses a module defines itself (tests of the plan path's classes)."""

import dataclasses
import importlib
import inspect


def own_dataclasses(name: str) -> list[type]:
    module = importlib.import_module(name)
    return [cls for cls in vars(module).values() if inspect.isclass(cls)
            and dataclasses.is_dataclass(cls) and cls.__module__ == name]
