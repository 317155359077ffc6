"""tokbench: a benchmark for attention token-selection tasks.

The names exported here are the light, import-cheap surface that plugins use to
register themselves. Heavy pieces (torch, Lightning) live in ``tokbench.task``,
``tokbench.model`` and ``tokbench.harness`` and are imported only when a run
builds something.
"""
from importlib.metadata import PackageNotFoundError, version as _dist_version

from tokbench.hookspecs import hookimpl
from tokbench.params import Param
from tokbench.specs import ModelSpec, Recipe, TaskSpec

try:
    __version__ = _dist_version("tokbench")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0+unknown"

__all__ = ["hookimpl", "Param", "TaskSpec", "ModelSpec", "Recipe", "__version__"]
