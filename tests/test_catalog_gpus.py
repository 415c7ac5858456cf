"""Tests for the shipped GPU and network catalog (kb/catalog/gpus.yaml, networks.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsolve.catalog import Catalog, load_catalog

SHIPPED = Path(__file__).resolve().parents[1] / "kb" / "catalog"

# Every GPU type issue 4 asks for, as a user would type it, and the entry it must reach.
REQUIRED_GPUS = {
    "V100-16G": "V100-16G", "V100-32G": "V100-32G", "T4": "T4", "A10": "A10", "A10G": "A10G",
    "L4": "L4", "L40S": "L40S", "RTX-3090": "RTX-3090", "RTX-4090": "RTX-4090",
    "RTX-5090": "RTX-5090", "RTX-A6000": "RTX-A6000", "A100-40G-SXM": "A100-40G-SXM",
    "A100-80G-SXM": "A100-80G-SXM", "A100-40G-PCIe": "A100-40G-PCIe",
    "A100-80G-PCIe": "A100-80G-PCIe", "A800": "A800-80G-SXM", "H100-SXM": "H100-SXM",
    "H100-PCIe": "H100-PCIe", "H800": "H800-SXM", "H20": "H20", "H200": "H200", "B200": "B200",
    "MI300X": "MI300X", "Ascend-910B": "Ascend-910B",
}

ALIASES = {
    "A100": "A100-80G-SXM", "a100-80g": "A100-80G-SXM", "A100-40G": "A100-40G-SXM",
    "H100": "H100-SXM", "4090": "RTX-4090", "3090": "RTX-3090", "5090": "RTX-5090",
    "A6000": "RTX-A6000", "V100": "V100-32G", "910B": "Ascend-910B", "mi300x": "MI300X",
    "A100-PCIE-80GB": "A100-80G-PCIe", "H100-PCIE-80GB": "H100-PCIe",
}

NETWORK_ALIASES = {
    "ib": "ib-400", "infiniband": "ib-400", "ndr": "ib-400", "hdr": "ib-200", "roce": "roce-200",
    "10gbe": "eth-10", "ethernet": "eth-100", "25gbe": "eth-25", "roce400": "roce-400",
}

PCIE_ONE_WAY_GBPS = {3: 16, 4: 32, 5: 64}


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog([SHIPPED])


def test_catalog_has_at_least_24_gpus(shipped):
    assert len(shipped.gpus) >= 24


@pytest.mark.parametrize("typed, canonical", sorted({**REQUIRED_GPUS, **ALIASES}.items()))
def test_gpu_names_and_aliases_resolve(shipped, typed, canonical):
    assert shipped.gpu(typed).name == canonical
    assert shipped.gpu(typed.lower()).name == canonical
    assert shipped.gpu(typed.upper()).name == canonical


def test_every_entry_has_a_source(shipped):
    for table in (shipped.gpus, shipped.networks):
        for entry in table.values():
            assert entry.source.strip(), entry.name
            assert entry.span is not None and entry.span.line > 0, entry.name


def test_loose_aliases_carry_a_note(shipped):
    note = shipped.resolved_alias_note("A100")
    assert "80 GB SXM4" in note
    assert shipped.resolved_alias_note("A100-80G") == note
    assert shipped.resolved_alias_note("A100-80G-SXM") == ""
    for loose in ("H100", "V100", "A800", "H800", "910B", "A100-40G", "B200-SXM"):
        assert shipped.resolved_alias_note(loose), loose
    # the canonical spelling never carries a note
    for name in shipped.gpus:
        assert shipped.resolved_alias_note(name) == ""


def test_fa3_only_on_hopper(shipped):
    hopper = {n for n, g in shipped.gpus.items() if g.arch == "hopper"}
    assert {"H100-SXM", "H100-PCIe", "H800-SXM", "H20", "H200"} <= hopper
    for gpu in shipped.gpus.values():
        assert gpu.fa3 == (gpu.arch == "hopper"), gpu.name


def test_fa2_only_on_nvidia_sm80_and_up(shipped):
    for gpu in shipped.gpus.values():
        sm80 = gpu.vendor == "nvidia" and gpu.compute_capability >= 8.0
        assert gpu.fa2 == sm80, gpu.name


def test_precision_flags(shipped):
    for gpu in shipped.gpus.values():
        assert gpu.bf16 == (gpu.arch not in ("volta", "turing")), gpu.name
        fp8 = gpu.arch in ("ada", "hopper", "blackwell") or gpu.name == "MI300X"
        assert gpu.fp8 == fp8, gpu.name
        assert gpu.bf16 == (gpu.bf16_tflops > 0) and gpu.fp8 == (gpu.fp8_tflops > 0), gpu.name
        if gpu.fp8:  # fp8 tensor math runs at twice the bf16 rate on every part listed
            assert gpu.fp8_tflops == pytest.approx(2 * gpu.bf16_tflops, rel=0.02), gpu.name
        if gpu.bf16:  # no part listed has a slower bf16 than fp16 path
            assert gpu.bf16_tflops == gpu.fp16_tflops, gpu.name


def test_vendor_arch_and_link_agree(shipped):
    for gpu in shipped.gpus.values():
        if gpu.vendor == "nvidia":
            assert gpu.compute_capability is not None, gpu.name
            assert gpu.link in ("nvlink", "pcie"), gpu.name
        else:
            assert gpu.compute_capability is None, gpu.name
        if gpu.link == "pcie":
            assert gpu.nvlink_gen is None, gpu.name
            assert gpu.link_gbps == PCIE_ONE_WAY_GBPS[gpu.pcie_gen], gpu.name
        if gpu.link == "nvlink":
            assert gpu.nvlink_gen is not None, gpu.name
    amd, huawei = shipped.gpu("MI300X"), shipped.gpu("910B")
    assert (amd.vendor, amd.arch, amd.link) == ("amd", "cdna3", "xgmi")
    assert (huawei.vendor, huawei.arch, huawei.link) == ("huawei", "davinci", "hccs")


def test_nvlink_figures_are_one_direction(shipped):
    # datasheet totals (bidirectional) halved: NVLink 2/3/4/5 = 300/600/900/1800 GB/s
    expected = {"V100-32G": 150, "V100-16G": 150, "A100-80G-SXM": 300, "A100-40G-SXM": 300,
                "A800-80G-SXM": 200, "H100-SXM": 450, "H800-SXM": 200, "H20": 450, "H200": 450,
                "B200": 900}
    for name, gbps in expected.items():
        assert shipped.gpu(name).link_gbps == gbps, name


def test_spot_values(shipped):
    h100 = shipped.gpu("H100-SXM")
    assert h100.memory_gib == pytest.approx(79.6, abs=0.1)
    assert (h100.bf16_tflops, h100.fp8_tflops, h100.hbm_gbps) == (989, 1979, 3350)
    mi300x = shipped.gpu("MI300X")
    assert 178 <= mi300x.memory_gib <= 192  # 192 GB class, GB or GiB
    assert (mi300x.bf16_tflops, mi300x.fp8_tflops, mi300x.hbm_gbps) == (1307.4, 2614.9, 5300)
    b200 = shipped.gpu("B200")
    assert (b200.bf16_tflops, b200.fp8_tflops, b200.hbm_gbps) == (2250, 4500, 8000)
    assert 167 <= b200.memory_gib <= 180
    assert shipped.gpu("H100-PCIe").bf16_tflops == 756
    assert shipped.gpu("L4").bf16_tflops == 121 and shipped.gpu("L4").fp8_tflops == 242.5
    assert shipped.gpu("A10").bf16_tflops == 125
    assert shipped.gpu("3090").bf16_tflops == 71
    assert shipped.gpu("A6000").bf16_tflops == 154.8
    assert shipped.gpu("V100-16G").bf16_tflops == 0 and shipped.gpu("V100-16G").fp16_tflops == 125
    assert shipped.gpu("910B").memory_gib == 64.0
    # the 800-series keep A100/H100 compute and differ only in NVLink
    for cut, full in (("A800", "A100-80G-SXM"), ("H800", "H100-SXM")):
        a, b = shipped.gpu(cut), shipped.gpu(full)
        assert (a.bf16_tflops, a.memory_gib, a.hbm_gbps) == (b.bf16_tflops, b.memory_gib, b.hbm_gbps)
        assert a.link_gbps < b.link_gbps


def test_memory_is_below_the_datasheet_gb(shipped):
    # nvidia-smi GiB never exceeds the datasheet GB figure converted to GiB by much
    datasheet_gb = {"A10": 24, "A10G": 24, "L4": 24, "L40S": 48, "RTX-3090": 24, "RTX-4090": 24,
                    "RTX-5090": 32, "RTX-A6000": 48, "H100-SXM": 80, "H200": 141, "B200": 180,
                    "V100-16G": 16, "V100-32G": 32}
    for name, gb in datasheet_gb.items():
        assert shipped.gpu(name).memory_gib <= gb, name


def test_networks(shipped):
    want = {"ib-400": ("infiniband", 400), "ib-200": ("infiniband", 200),
            "ib-8x400": ("infiniband", 3200), "roce-200": ("roce", 200), "roce-400": ("roce", 400),
            "eth-100": ("ethernet", 100), "eth-25": ("ethernet", 25), "eth-10": ("ethernet", 10)}
    for name, (kind, gbps) in want.items():
        net = shipped.network(name)
        assert (net.name, net.kind, net.gbps) == (name, kind, gbps)
    for alias, name in NETWORK_ALIASES.items():
        assert shipped.network(alias).name == name, alias
    # the loose aliases say what they were read as
    for loose in ("ib", "infiniband", "roce", "ethernet"):
        assert loose in shipped.network(loose).notes, loose
