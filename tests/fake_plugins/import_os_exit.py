"""A plugin that calls os._exit(0) when imported."""
import os

os._exit(0)
