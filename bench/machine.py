"""A description of the machine, stored beside every result."""

import os
import platform


def describe() -> dict:
    return {"python": platform.python_version(), "system": platform.system(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "processor": platform.processor() or "unknown"}
