"""Shared fixtures. Every test runs on CPU; kernels run in TPU interpret mode."""
from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["PALLAS_COURSE_MODE"] = "tpu-interpret"
