"""The course's one precision rule for a matmul block, used by every matmul kernel the course writes or checks
(LAB·1.2's matmul, matmul_acc and matmul_gelu, LAB·1.4's model kernel, the grader's reference kernels) and by the
step model's MXU passes (pallas_course.cost_model.matmul_passes).

Pallas TPU docs ("Precision control", docs.jax.dev/en/latest/pallas/tpu/details.html): 32-bit operands are rounded
to bfloat16 unless float32 precision is requested, so a float32 block asks for Precision.HIGHEST (6 MXU passes,
course_tools.bench.mxu_passes' count); a bfloat16 block needs no request and may not make one (libtpu 0.0.42.1 refuses HIGHEST
there: "Bad lhs type"). `with jax.default_matmul_precision("float32"):` around the call puts HIGHEST into every
default-precision dot it traces, the same request for a whole region (the docs say the lowering honours it).
"""

from __future__ import annotations

from typing import Any


def matmul_precision(dtype: Any) -> Any:
    """jax.lax.Precision.HIGHEST for float32 blocks, None (the default: one bf16 pass) for any other dtype."""
    import jax
    import numpy as np

    return jax.lax.Precision.HIGHEST if np.dtype(dtype) == np.float32 else None
