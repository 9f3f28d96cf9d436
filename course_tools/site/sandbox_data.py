"""What EX·09's in-page legality arithmetic (site/js/legality.js) reads: the same constants the Python rules use.

Chip constants and their sources come from course.yml through pallas_course.chips, rule sources and the
the copy kernel's operands and buffers from pallas_course.legality, and each dtype's width from NumPy/ml_dtypes, so the page
never types a number of its own. tests/test_site_legality.py runs legality.js on this data against
pallas_course.legality.check_block over a shared table of cases.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from pallas_course import legality, tiling
from pallas_course.chips import chips


def dtype_info(name: str) -> dict[str, Any]:
    """Width facts the rules use: bytes per element, bits as Mosaic stores it, bytes for the native tile."""
    dt = np.dtype(name)
    bits = legality.stored_bits(dt)  # bool is stored as 32-bit in Mosaic
    return {
        "name": dt.name,
        "itemsize": dt.itemsize,
        "bits": bits,
        "tile_itemsize": 4 if dt == np.bool_ else dt.itemsize,
    }


def chip_info(name: str) -> dict[str, Any]:
    c = chips()[name]
    fields = ("lanes", "sublanes", "vmem_bytes", "default_scoped_vmem_bytes")
    return {
        "name": c.name,
        "device_kind": c.device_kind,
        **{f: getattr(c, f) for f in fields},
        "sources": {f: c.source(f) for f in fields},
    }


def legality_data(dtypes: Iterable[str]) -> dict[str, Any]:
    """Everything legality.js needs, as JSON-ready data."""
    return {
        "dtypes": {np.dtype(d).name: dtype_info(d) for d in dtypes},
        "chips": {name: chip_info(name) for name in chips()},
        "sources": {
            "lowering": legality.LOWERING_SOURCE,
            "compile": legality.COMPILE_SOURCE,
            "tile": legality.TILE_SOURCE,
        },
        "tiling": tiling.as_data(),
        "operands": legality.SANDBOX_OPERANDS,
        "buffers": legality.DEFAULT_BUFFER_COUNT,
        "vmem_source": legality.VMEM_SOURCE,
    }
