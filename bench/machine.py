"""A description of the machine, stored beside every result."""

import os
import platform


def describe() -> dict:
    return {"python": platform.python_version(), "system": platform.system(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "processor": platform.processor() or "unknown",
            # other work on a shared machine inflates wall times; CPU times are also kept
            "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}
