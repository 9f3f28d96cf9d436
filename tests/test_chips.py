"""course.yml's chips section: valid, sourced, and equal to what jax itself says about each chip."""

from __future__ import annotations

import importlib

import pytest
from jax.experimental.pallas import tpu as pltpu

# Chip facts through public API (pltpu.ChipVersion, pltpu.get_tpu_info_for_chip: jax 0.10.2 and 0.12). Only
# device kind -> chip has no public spelling: jax 0.12 keeps it in jax/_src/tpu_info.py (the old Pallas path
# is a shim marked for removal), 0.10.2 in jax/_src/pallas/mosaic/tpu_info.py.
try:
    _private = importlib.import_module("jax._src.tpu_info")
except ModuleNotFoundError:
    _private = importlib.import_module("jax._src.pallas.mosaic.tpu_info")
chip_version_from_device_kind = _private.chip_version_from_device_kind

from pallas_course.chips import Chip, ChipError, chip, chip_for_device_kind, chips, current_chip  # noqa: E402 - after the private module's lookup

COURSE_CHIPS = ["v4", "v5e", "v5p", "v6e", "v7x"]


def test_every_course_chip_is_listed():
    """The five chips the chapter names are all in course.yml."""
    assert list(chips()) == COURSE_CHIPS


@pytest.mark.parametrize("name", COURSE_CHIPS)
def test_constants_match_jax_tpu_info(name):
    """Each constant equals jax's own table (per TensorCore; bandwidth and FLOP/s per chip)."""
    c = chip(name)
    version = pltpu.ChipVersion("7x" if name == "v7x" else name)  # jax spells v7x "7x"
    assert chip_version_from_device_kind(c.device_kind) == version, f"jax reads {c.device_kind!r} otherwise"
    info = pltpu.get_tpu_info_for_chip(version, 1)
    cores = version.num_physical_tensor_cores_per_chip
    assert c.tensorcores_per_chip == cores
    assert c.vmem_bytes == info.vmem_capacity_bytes
    assert c.lanes == info.num_lanes and c.sublanes == info.num_sublanes
    assert c.mxu == info.mxu_column_size and c.num_mxus == info.num_mxus
    assert c.bf16_flops_per_s_per_core == pytest.approx(info.bf16_ops_per_second, rel=1e-6)
    # jax stores per-core numbers as chip // cores; undo it to compare with our per-chip numbers.
    assert c.hbm_bytes_per_s == pytest.approx(info.mem_bw_bytes_per_second * cores, rel=1e-6)
    assert c.bf16_flops_per_s == pytest.approx(info.bf16_ops_per_second * cores, rel=1e-6)


@pytest.mark.parametrize("name", COURSE_CHIPS)
def test_every_device_kind_is_known_to_jax(name):
    """Every device kind and alias maps, in jax, to the same chip generation."""
    c = chip(name)
    versions = {chip_version_from_device_kind(k) for k in c.device_kinds}
    assert len(versions) == 1 and None not in versions, c.device_kinds


def test_device_kind_lookup():
    """jax.devices()[0].device_kind strings resolve to course chips; others to None."""
    assert chip_for_device_kind("TPU v5 lite").name == "v5e"
    assert chip_for_device_kind("TPU v5").name == "v5p"
    assert chip_for_device_kind("TPU v6 lite").name == "v6e"
    assert chip_for_device_kind("TPU7x").name == "v7x"
    assert chip_for_device_kind("cpu") is None
    assert chip_for_device_kind("TPU v2") is None
    assert chip("TPU v4").name == "v4"


def test_current_chip_on_cpu_is_none():
    """On this CPU machine there is no chip."""
    import jax

    if jax.default_backend() != "tpu":
        assert current_chip() is None


def test_scoped_limit_is_apart_from_capacity():
    """The default scoped VMEM limit is its own number, below capacity on v5e/v6e, with its own source."""
    for c in chips().values():
        assert c.default_scoped_vmem_bytes <= c.vmem_bytes
        assert c.source("default_scoped_vmem_bytes") != c.source("vmem_bytes")
    assert chip("v5e").default_scoped_vmem_bytes == 16 * 2**20
    assert chip("v6e").default_scoped_vmem_bytes == 32 * 2**20


def test_seed_vmem_budget_on_v5e():
    """EX·09 quotes 134,217,728 B for v5e, from the scaling book."""
    assert chip("v5e").vmem_bytes == 134_217_728
    assert "scaling-book" in chip("v5e").source("vmem_bytes")


def test_native_sublane_tile():
    """8 rows for 32-bit, 16 for 16-bit, 32 for 8-bit types."""
    c = chip("v5e")
    assert (c.sublane_tile(4), c.sublane_tile(2), c.sublane_tile(1)) == (8, 16, 32)


def test_unknown_chip_message():
    """An unknown name says which chips exist."""
    with pytest.raises(ChipError, match=r"unknown chip 'v9'; known chips are v4, v5e"):
        chip("v9")


def test_unsourced_field_is_rejected():
    """A sources entry naming a non-field is a schema error, so typos cannot hide a number's source."""
    raw = chip("v5e").model_dump()
    raw["sources"] = {"default": "x", "vmem_byte": "typo"}
    with pytest.raises(ValueError, match="unknown fields"):
        Chip.model_validate(raw)
    raw["sources"] = {"vmem_bytes": "no default"}
    with pytest.raises(ValueError, match="default"):
        Chip.model_validate(raw)


def test_peak_is_mxus_times_size_squared_times_two_times_clock():
    """peak = num_mxus x 2 x mxu^2 x clock per TensorCore; on v5e the clock it implies is the scaling book's 1.5 GHz
    ("about 5e13 bf16 FLOPs/s per MXU at 1.5 GHz on TPU v5e", jax-ml.github.io/scaling-book/tpus/)."""
    for c in chips().values():
        assert c.mxu_flops_per_cycle * c.implied_clock_hz == pytest.approx(c.bf16_flops_per_s_per_core)
    v5e = chip("v5e")
    assert v5e.num_mxus == 4 and v5e.implied_clock_hz == pytest.approx(1.5e9, rel=0.01)
    assert v5e.bf16_flops_per_s_per_core / v5e.num_mxus == pytest.approx(5e13, rel=0.02)


@pytest.mark.parametrize("name", COURSE_CHIPS)
def test_device_numbers_match_get_tpu_info(name):
    """One JAX device's bandwidth and peak: pltpu.get_tpu_info()'s per-TensorCore numbers x the cores a kernel uses
    (megacore: num_cores=2, both only with a "parallel" axis; v7x: a device is one TensorCore)."""
    c = chip(name)
    version = pltpu.ChipVersion("7x" if name == "v7x" else name)
    assert c.megacore == version.supports_megacore
    cores = 2 if c.megacore else 1
    info = pltpu.get_tpu_info_for_chip(version, cores)
    assert info.num_cores == cores
    assert c.device_hbm_bytes_per_s(parallel=False) == pytest.approx(info.mem_bw_bytes_per_second, rel=1e-6)
    assert c.device_hbm_bytes_per_s(parallel=True) == pytest.approx(info.mem_bw_bytes_per_second * cores, rel=1e-6)
    assert c.device_bf16_flops_per_s(parallel=True) == pytest.approx(info.bf16_ops_per_second * cores, rel=1e-6)
