"""A plugin that calls sys.exit(0) when imported."""
import sys

sys.exit(0)
