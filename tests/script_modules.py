"""Load one of the project's scripts (benchmark/budget/*.py, benchmark/tools/*.py) as a module for its tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
BUDGET = BENCHMARK / "budget"


def load_script(path: Path) -> ModuleType:
    """The script at ``path`` as a module named after its file (registered, as its dataclasses look it up), its
    folder importable as when it runs (a script may import its neighbours)."""
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
