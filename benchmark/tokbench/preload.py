"""What the workers' fork server imports once, so that every worker forks with it loaded (:mod:`tokbench.isolation`).

Only the fork server imports this module. The server leaves when the last holder of its "alive" pipe has gone (the
parent, and the workers, which close their end at start); a normal interpreter exit would then spend seconds tearing
down torch and Lightning (3.7 s measured on 2 loaded cores after the parent was killed), so it exits at once. The
workers end through ``os._exit`` and never run this.
"""
import atexit
import os

import tokbench.harness  # noqa: F401 - the point: torch and Lightning imported once, for every worker

atexit.register(os._exit, 0)
