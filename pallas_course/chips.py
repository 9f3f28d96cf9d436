"""The TPU chips the course talks about, read from course.yml's `chips:` section.

One home for chip constants: the legality model, the schedule model, the bench and the notebooks read them
from here, never from a number typed next to the code. Every constant carries its source, and the physical
VMEM of a TensorCore (`vmem_bytes`) is kept apart from the compiler's default scoped VMEM limit
(`default_scoped_vmem_bytes`), the budget a kernel actually gets unless it asks for more.
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .manifest import ManifestError, manifest


class ChipError(KeyError):
    """An unknown chip name or device kind."""

    def __str__(self) -> str:  # KeyError would repr() the message, quotes and all
        return str(self.args[0]) if self.args else ""


class Chip(BaseModel):
    """One TPU generation. Per TensorCore unless a field's docstring says per chip."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="course name, e.g. 'v5e' (the key in course.yml)")
    device_kind: str = Field(description="jax.devices()[0].device_kind on this chip")
    device_kind_aliases: tuple[str, ...] = ()
    tensorcores_per_chip: int = Field(ge=1)
    lanes: int = Field(ge=1, description="vreg lanes: the minor block dim tiles by this")
    sublanes: int = Field(ge=1, description="vreg sublanes (32-bit): the second-minor block dim tiles by this")
    vmem_bytes: int = Field(gt=0, description="physical VMEM of one TensorCore")
    default_scoped_vmem_bytes: int = Field(gt=0, description="compiler's default per-kernel scoped VMEM limit")
    hbm_bytes_per_s: float = Field(gt=0, description="HBM bandwidth, per chip")
    bf16_flops_per_s: float = Field(gt=0, description="peak bf16 FLOP/s, per chip")
    mxu: int = Field(ge=1, description="MXU width (128 or 256)")
    num_mxus: int = Field(ge=1, description="MXUs in one TensorCore (pltpu.get_tpu_info().num_mxus)")
    megacore: bool = Field(
        default=False,
        description="the chip's TensorCores are one JAX device (v4, v5p); a pallas_call uses both only through a "
        '"parallel" grid axis',
    )
    mxu_passes: dict[str, float] = Field(
        description="MXU passes of a matmul block relative to bfloat16, by 'dtype' or 'dtype/PRECISION' "
        "(counted in the compiler's output: its source says where)"
    )
    sources: dict[str, str]

    @model_validator(mode="after")
    def _check(self) -> "Chip":
        # A number without a source is not allowed in: `default` covers the rest, and no source may name a
        # field that does not exist (a typo would silently leave its field on `default`).
        if "default" not in self.sources:
            raise ValueError("sources needs a 'default' entry (the source of every field without its own)")
        unknown = set(self.sources) - {"default"} - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"sources names unknown fields {sorted(unknown)}")
        if self.default_scoped_vmem_bytes > self.vmem_bytes:
            raise ValueError(
                f"default_scoped_vmem_bytes={self.default_scoped_vmem_bytes} exceeds vmem_bytes={self.vmem_bytes}"
            )
        return self

    def source(self, field: str) -> str:
        """Where `field`'s value comes from."""
        if field not in type(self).model_fields:
            raise AttributeError(f"Chip has no field {field!r}")
        return self.sources.get(field, self.sources["default"])

    def cores_used(self, parallel: bool) -> int:
        """TensorCores one pallas_call runs on, on one JAX device: a v7x device is one TensorCore; a megacore
        device (v4, v5p) is two, and a kernel uses the second only through a "parallel" grid axis (Pallas TPU
        pipelining docs: "*not* specifying it will result in only one TensorCore being used")."""
        return self.tensorcores_per_chip if self.megacore and parallel else 1

    def device_hbm_bytes_per_s(self, parallel: bool) -> float:
        """The HBM bandwidth one pallas_call gets on one JAX device: pltpu.get_tpu_info()'s per-TensorCore
        mem_bw_bytes_per_second times the cores it runs on (v5e, v6e: the chip's; v7x: half the chip's)."""
        return self.hbm_bytes_per_s / self.tensorcores_per_chip * self.cores_used(parallel)

    def device_bf16_flops_per_s(self, parallel: bool) -> float:
        """`device_hbm_bytes_per_s`'s rule for the bf16 peak: pltpu.get_tpu_info().bf16_ops_per_second x cores used."""
        return self.bf16_flops_per_s / self.tensorcores_per_chip * self.cores_used(parallel)

    def passes(self, dtype: str, precision: str | None = None) -> float:
        """MXU passes of one matmul block of `dtype` at `precision` (None: the default), relative to bfloat16."""
        key = dtype if precision in (None, "DEFAULT") else f"{dtype}/{precision}"
        if key not in self.mxu_passes:
            raise ChipError(f"{self.name}: no MXU pass count for {key!r}; recorded: {', '.join(self.mxu_passes)}")
        return self.mxu_passes[key]

    @property
    def bf16_flops_per_s_per_core(self) -> float:
        """Peak bf16 FLOP/s of one TensorCore, as `pltpu.get_tpu_info().bf16_ops_per_second` states it."""
        return self.bf16_flops_per_s / self.tensorcores_per_chip

    @property
    def mxu_flops_per_cycle(self) -> int:
        """FLOPs one TensorCore's MXUs do per clock: each MXU is mxu x mxu multiply-adds (2 FLOPs) a cycle."""
        return self.num_mxus * 2 * self.mxu**2

    @property
    def implied_clock_hz(self) -> float:
        """The clock that makes peak = num_mxus x 2 x mxu^2 x clock hold for tpu_info's numbers (derived, not a
        published clock: v5e gives 1.50 GHz, the scaling book's "1.5 GHz")."""
        return self.bf16_flops_per_s_per_core / self.mxu_flops_per_cycle

    @property
    def device_kinds(self) -> tuple[str, ...]:
        return (self.device_kind, *self.device_kind_aliases)

    def sublane_tile(self, itemsize: int) -> int:
        """Native second-minor tile for a dtype of `itemsize` bytes: 8 rows of 32-bit, 16 of 16-bit, 32 of 8-bit.

        Narrow types pack 32 // bits values into one 32-bit sublane, so a full vreg holds more rows.
        """
        from pallas_course.tiling import native_tile  # the course's one tiling table

        return native_tile(8 * itemsize)[0]


@functools.cache
def chips() -> dict[str, Chip]:
    """Every chip in course.yml, by course name ('v4', 'v5e', ...)."""
    out: dict[str, Chip] = {}
    for name, raw in manifest().chips.items():
        try:
            out[name] = Chip.model_validate({"name": name, **raw})
        except ValidationError as e:
            lines = [f"  chips.{name}.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
            raise ManifestError("course.yml chips section does not match the schema:\n" + "\n".join(lines)) from None
    return out


def chip(name: str) -> Chip:
    """The chip called `name` ('v5e'); a device kind ('TPU v5 lite') works too."""
    table = chips()
    if name in table:
        return table[name]
    found = chip_for_device_kind(name)
    if found is not None:
        return found
    raise ChipError(f"unknown chip {name!r}; known chips are {', '.join(table)}")


def chip_for_device_kind(device_kind: str) -> Chip | None:
    """The chip whose `jax.devices()[0].device_kind` is `device_kind`, or None (cpu, gpu, TPU v2/v3)."""
    for c in chips().values():
        if device_kind in c.device_kinds:
            return c
    return None


def current_chip() -> Chip | None:
    """The chip this process runs on, or None when the default device is not a TPU the course knows."""
    import jax

    return chip_for_device_kind(jax.devices()[0].device_kind)
