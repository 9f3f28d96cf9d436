"""One compile case per solution kernel that a lab's compile rule grades, at a graded shape: what
tests/test_tpu_compile.py compiles on this machine and what `make check-colab` compiles in its stand-in of
Colab's image. Plain data (lab id -> [(kernel, [(shape, dtype)], kwargs)]): it travels into a notebook cell."""

from __future__ import annotations

from typing import Any

CASES: dict[str, list[tuple[str, list[tuple[tuple[int, ...], str]], dict[str, int]]]] = {
    "lab-1.1-first-kernels": [
        ("add", [((256, 256), "float32"), ((256, 256), "float32")], {}),
        ("transpose", [((256, 512), "float32")], {"bm": 128, "bn": 256}),
    ],
    "lab-1.2-tiled-matmul": [
        ("rowmax", [((64, 1024), "float32")], {"bm": 8, "bn": 256}),  # (bm, 1) output blocks
        ("rowmax_dense", [((64, 1024), "float32")], {"bm": 8, "bn": 256}),  # (bm, 128): lane-dense, reduced once
        ("matmul", [((256, 384), "float32"), ((384, 512), "float32")], {}),
        ("matmul_acc", [((256, 512), "bfloat16"), ((512, 256), "bfloat16")], {}),
        ("matmul_gelu", [((256, 256), "float32"), ((256, 256), "float32")], {}),
    ],
    "lab-1.3-fused-softmax-layernorm": [
        ("softmax", [((256, 512), "float32")], {}),
        ("softmax", [((256, 512), "bfloat16")], {"rows_per_block": 16}),
        ("layernorm", [((256, 512), "float32"), ((512,), "float32"), ((512,), "float32")], {}),
        ("column_sums", [((200, 128), "float32")], {"rows_per_block": 16}),  # a partial last block of 8 rows
    ],
    "lab-1.4-pipelining-profile": [
        ("matmul_pipeline_off", [((256, 256), "float32"), ((256, 256), "float32")], {}),
    ],
    "lab-1.6-copies-online-softmax": [
        ("add_copies", [((64, 256), "float32"), ((64, 256), "float32")], {}),  # HBM refs, DMAs and semaphores
        ("add_copies", [((64, 512), "bfloat16"), ((64, 512), "bfloat16")], {"rows_per_block": 16}),
        ("row_logsumexp", [((64, 512), "float32")], {}),
        ("row_logsumexp", [((64, 512), "bfloat16")], {"rows_per_block": 16, "cols_per_block": 128}),
    ],
}


def structs(args: list[tuple[tuple[int, ...], str]]) -> tuple[Any, ...]:
    import jax
    import jax.numpy as jnp

    return tuple(jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype)) for shape, dtype in args)


# Kernels interpret mode runs and the TPU compiler refuses (jax 0.10.2 + libtpu 0.0.42.1, FACTS.md): name ->
# (the body applied to each row block, the block, the array, the error kind pallas_course.errors gives it).
REJECTS: dict[str, tuple[str, tuple[int, int], tuple[int, int], str]] = {
    "gelu exact (erfc)": ("jax.nn.gelu(x, approximate=False)", (8, 512), (256, 512), "tpu-unimplemented"),
    "jnp.sort": ("jnp.sort(x, axis=-1)", (8, 512), (256, 512), "tpu-unimplemented"),
    "jnp.cumsum": ("jnp.cumsum(x, axis=-1)", (8, 512), (256, 512), "tpu-unimplemented"),
    "1-row f32 block": ("x * 2", (1, 512), (256, 512), "tpu-tiling"),
    "4-row f32 block": ("x * 2", (4, 512), (256, 512), "tpu-tiling"),
    "whole 2048x2048 f32 block": ("x * 2", (2048, 2048), (2048, 2048), "tpu-vmem"),
}
# Refused on these chips only (default: v5e and v6e). A one-step grid's whole (2048, 2048) f32 block is over v5e's
# 16 MiB scoped limit and compiles on v6e (seen with libtpu 0.0.42.1).
REJECT_CHIPS: dict[str, tuple[str, ...]] = {"whole 2048x2048 f32 block": ("v5e",)}


def row_kernel(
    body: str, block: tuple[int, int], shape: tuple[int, int], dtype: str = "float32", interpret: Any = False
) -> tuple[Any, tuple[Any, ...]]:
    """A row-blocked elementwise pallas_call applying `body` (an expression in x) to each block, and its input."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    apply = eval(f"lambda x: {body}", {"jax": jax, "jnp": jnp})  # noqa: S307 - the course's own table above

    def kernel(x_ref, o_ref):
        o_ref[...] = apply(x_ref[...]).astype(o_ref.dtype)

    def fn(x):
        spec = pl.BlockSpec(block, lambda i: (i, 0))
        return pl.pallas_call(
            kernel,
            grid=(shape[0] // block[0],),
            in_specs=[spec],
            out_specs=spec,
            out_shape=jax.ShapeDtypeStruct(shape, x.dtype),
            interpret=interpret,
        )(x)

    return fn, (jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)),)
