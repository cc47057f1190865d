import math

import pytest

from cmdare.planner.speed.gpu_catalog import UnknownGpuError, all_gpus, get_gpu, gpu_names

REQUIRED = ["K80", "P100", "V100", "T4", "P4", "L4", "A100", "A100-80GB", "H100", "H200", "B200"]


def test_required_gpus_present():
    assert set(REQUIRED) <= set(gpu_names())


@pytest.mark.parametrize(
    "alias,name",
    [("nvidia-tesla-v100", "V100"), ("a100-80gb", "A100-80GB"), ("A100_80GB", "A100-80GB"), ("k80", "K80"),
     ("NVIDIA-H100-80GB", "H100"), ("a100", "A100")],
)  # fmt: skip
def test_aliases_case_insensitive(alias, name):
    assert get_gpu(alias).name == name


def test_unknown_gpu_is_value_error_with_known_list():
    with pytest.raises(UnknownGpuError, match="known: K80"):
        get_gpu("GTX-480")
    assert issubclass(UnknownGpuError, ValueError)


def test_specs_positive_and_sourced():
    for spec in all_gpus():
        for v in (
            spec.fp32_tflops,
            spec.tf32_tflops,
            spec.fp16_tflops,
            spec.mem_bw_gbs,
            spec.mem_gb,
            spec.host_nic_gbps,
        ):
            assert v > 0 and math.isfinite(v)
        assert spec.tf32_tflops >= spec.fp32_tflops
        assert spec.source


def test_study_values_for_measured_gpus():
    # CM-DARE GPU TFLOPS column (speed_data/0latency_*.csv)
    assert get_gpu("K80").fp32_tflops == 4.113
    assert get_gpu("P100").fp32_tflops == 9.526
