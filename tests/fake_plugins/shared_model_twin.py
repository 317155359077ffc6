"""A second plugin module registering what ``shared_model`` registers: together they share the name."""
from shared_model import TOKBENCH_CONTRACT, register_models  # noqa: F401 - the hook module's contents
