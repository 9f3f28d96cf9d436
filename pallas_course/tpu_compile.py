"""Compile a kernel for a TPU topology on this CPU machine (deviceless AOT), when libtpu is installed.

Used to confirm what the legality model predicts: a VMEM budget line (`CompileTimeScopedVmemOom`, "Scoped
allocation with size 24.00M and limit 16.00M") or a Mosaic tiling error. Without libtpu (the plain course
venv) `available()` is False and `compile_for` returns a result that says how to install it, never raises.
Install: requirements-tpu-aot.txt, in its own venv.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

# Topologies that compiled with jax 0.10.2 + libtpu 0.0.42.1 (not v5e:1x1, not v7x).
TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
_VMEM = re.compile(r"Scoped allocation with size [\d.]+\w? and limit [\d.]+\w?|Used [\d.]+\w? of [\d.]+\w? vmem")
_MOSAIC = re.compile(r"E\d{4}: \w+[^\n]*")


@dataclass(frozen=True)
class CompileResult:
    chip: str
    topology: str
    ok: bool
    skipped: bool = False
    error_kind: str | None = None     # "vmem", "mosaic", "other"
    message: str = ""                 # the compiler's own words, first relevant line


def available() -> bool:
    """True when libtpu is importable, so deviceless TPU compiles can run."""
    try:
        import libtpu  # noqa: F401
    except ImportError:
        return False
    return True


def compile_for(fn: Callable[..., Any], *shapes: Any, chip: str = "v5e") -> CompileResult:
    """Compile `fn(*shapes)` (ShapeDtypeStructs) for `chip`'s topology with the real TPU compiler."""
    topology = TOPOLOGIES.get(chip)
    if topology is None:
        return CompileResult(chip, "", False, skipped=True,
                             message=f"no deviceless topology for {chip}; known: {', '.join(TOPOLOGIES)}")
    if not available():
        return CompileResult(chip, topology, False, skipped=True,
                             message="libtpu is not installed: pip install -r requirements-tpu-aot.txt in its own venv")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")   # quiets an init error on CPU
    import jax
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    topo = topologies.get_topology_desc(topology, "tpu")
    sharding = NamedSharding(Mesh([topo.devices[0]], ("x",)), PartitionSpec())
    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in shapes]
    try:
        jax.jit(fn).trace(*args).lower().compile()
    except Exception as e:  # noqa: BLE001 - the compiler's error is the result
        text = str(e)
        if m := _VMEM.search(text):
            return CompileResult(chip, topology, False, error_kind="vmem", message=m.group(0))
        if m := _MOSAIC.search(text):
            return CompileResult(chip, topology, False, error_kind="mosaic", message=m.group(0))
        return CompileResult(chip, topology, False, error_kind="other", message=text.strip().splitlines()[0])
    return CompileResult(chip, topology, True)
