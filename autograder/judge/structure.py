"""The structure the checks read, as data: what pallas_course.kernel_trace reads of a traced computation (each
pallas_call's grid, blocks and their index maps at every grid point, scratch, primitives, what runs outside), as
plain JSON-able data, less what the rebuild (autograder.judge.rebuild) adds or evaluates in place: a direct trace
and the trace of its rebuild must give the same (the round-trip check).
"""

from __future__ import annotations

import math
from typing import Any

from autograder.judge.rebuild import GLUE, INLINED


MAX_GRID_POINTS = 65_536  # larger grids are compared without their index tables (no lab grid comes near)


def _block_data(b: Any, points: list[tuple[int, ...]] | None) -> dict[str, Any]:
    return {
        "role": b.role,
        "position": b.position,
        "array_shape": list(b.array_shape),
        "dtype": b.dtype.name,
        "block_shape": list(b.block_shape),
        "buffer_count": b.buffer_count,
        "trivial_window": bool(b.trivial_window),
        "memory_space": str(b.memory_space),
        "block_indices": None if points is None else [list(b.block_index(*p)) for p in points],
    }


def trace_data(t: Any) -> dict[str, Any]:
    """What the structural checks read of a Trace (pallas_course.kernel_trace), as plain data: each call's grid,
    blocks with their index maps evaluated at every grid point, scratch, primitives, and what runs outside."""
    from pallas_course.kernel_trace import read_before_written

    calls = []
    for pc in t.pallas_calls:
        points = list(pc.grid_points()) if math.prod(pc.grid) <= MAX_GRID_POINTS else None
        calls.append(
            {
                "name": pc.name,
                "grid": list(pc.grid),
                "inputs": [_block_data(b, points) for b in pc.inputs],
                "outputs": [_block_data(b, points) for b in pc.outputs],
                "scratch": [[list(shape), dt.name, space] for shape, dt, space in pc.scratch],
                "dimension_semantics": list(pc.dimension_semantics) if pc.dimension_semantics else None,
                "kernel_ops": {k: list(v) for k, v in pc.kernel_ops.items()},
                "dot_precisions": list(pc.dot_precisions),
                "mask_products": list(pc.mask_products),
                "lane_reductions_every_step": list(pc.lane_reductions_every_step),
                "unread": read_before_written(pc),
            }
        )
    return {"pallas_calls": calls, "outside": list(t.outside), "outside_sizes": list(t.outside_sizes)}


def structure_data(trace: Any) -> dict[str, Any]:
    """What the structural checks read of a Trace, as data, less the calls the rebuild evaluates in place and the
    glue it adds: a direct trace and the trace of its rebuild must give the same (the round-trip check)."""
    data = trace_data(trace)
    skip = GLUE | frozenset(INLINED)
    for call in data["pallas_calls"]:
        call["kernel_ops"] = {k: v for k, v in call["kernel_ops"].items() if k not in skip}
    kept = [(o, n) for o, n in zip(data["outside"], data["outside_sizes"]) if o not in skip]
    data["outside"], data["outside_sizes"] = [o for o, _ in kept], [n for _, n in kept]
    return data
