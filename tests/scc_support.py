"""Shared by the SCC tests."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """A training step of these tiny models is microseconds of work: a second intra-op thread only
    adds synchronisation, which on a loaded 2-core machine made each step ~15x slower (same numbers)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
