"""Metrics shared by task plugins."""
from __future__ import annotations

from typing import Any

import numpy as np


def matrix_correlation(a: Any, b: Any) -> float:
    """<A, B> / (||A||_F ||B||_F) for two equally shaped arrays or CPU tensors; 0 when either is zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denominator = np.linalg.norm(a) * np.linalg.norm(b)
    return 0.0 if denominator == 0 else float((a * b).sum() / denominator)
