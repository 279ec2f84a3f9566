"""``bench/eventlog.py`` (the foundation's throughput bench) as a module for the other benches.

That script's name would shadow the ``eventlog`` package, so it cannot be imported by name;
the benches that reuse its workloads (``todos.py``, ``group_floor.py``) load it by path here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_eventlog_bench"]


def load_eventlog_bench() -> ModuleType:
    """``bench/eventlog.py`` loaded by path, once, as ``bench_eventlog``."""
    loaded = sys.modules.get("bench_eventlog")
    if loaded is not None:
        return loaded
    path = Path(__file__).resolve().parent / "eventlog.py"
    spec = importlib.util.spec_from_file_location("bench_eventlog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module
