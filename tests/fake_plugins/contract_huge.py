"""A plugin whose contract declaration is a 3 MB string."""
TOKBENCH_CONTRACT = "2" * 3_000_000
