"""The record model: GPU model names, states, GPU counts, filters."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr


@pytest.mark.parametrize("raw, model", [
    # Alibaba Cloud GPUSpec
    ("NVIDIA A10", "A10"),
    ("NVIDIA H20", "H20"),
    ("NVIDIA L20", "L20"),
    ("NVIDIA A10*1/4", "A10"),
    # Tencent Cloud GPUType / GpuType
    ("NVIDIA Tesla T4", "T4"),
    ("NVIDIA Tesla V100-NVLINK-32G", "V100"),
    ("NVIDIA A100 NVLink 40GB", "A100"),
    ("NVIDIA A800", "A800"),
    ("NVIDIA H800", "H800"),
    # Huawei Cloud flavor GPUs, PCI aliases and gpu_specs
    ("NVIDIA-A100-80G", "A100"),
    ("nvidia-p100", "P100"),
    ("m60_1q", "M60"),
    # AWS GpuInfo names
    ("H100", "H100"),
    ("H200", "H200"),
    ("L40S", "L40S"),
    ("A10G", "A10G"),
    ("T4g", "T4G"),
    ("V100", "V100"),
    ("B200", "B200"),
    ("GB200", "GB200"),
    # No model token: cleaned up, still a stable group name.
    ("RTX PRO Server 6000", "RTX-PRO-SERVER-6000"),
    ("", None),
    (None, None),
])
def test_gpu_models_are_normalised(raw, model):
    assert gr.normalize_gpu_model(raw) == model


@pytest.mark.parametrize("provider, raw, state", [
    ("aws", "running", "running"),
    ("aws", "shutting-down", "terminating"),
    ("aliyun", "Starting", "pending"),
    ("aliyun", "Stopped", "stopped"),
    ("tencent", "LAUNCH_FAILED", "error"),
    ("tencent", "SHUTDOWN", "stopped"),
    ("huawei", "ACTIVE", "running"),
    ("huawei", "SHUTOFF", "stopped"),
    ("huawei", "DELETED", "terminated"),
    ("huawei", "SOMETHING_NEW", "unknown"),
    ("aws", None, "unknown"),
])
def test_states_are_normalised(provider, raw, state):
    assert gr.normalize_state(provider, raw) == state


def test_gpu_counts_keep_vgpu_slices_and_drop_empty_models():
    assert gr.gpu_info("NVIDIA A10", 0.25, 6144) == {"model": "A10", "count": 0.25, "memory_mib": 6144}
    assert gr.gpu_info("NVIDIA T4", 1.0, None)["count"] == 1
    assert isinstance(gr.gpu_info("NVIDIA T4", "4")["count"], int)
    # A CPU type that still reports an (empty or stale) GPU name has no GPU.
    assert gr.gpu_info("NVIDIA T4", 0) == {"model": None, "count": 0, "memory_mib": None}
    assert gr.mib(24, "GiB") == 24576
    assert gr.mib(0) is None


def test_records_have_every_key_and_reject_unknown_ones():
    record = gr.make_record("aws", "us-east-1", "i-1", charge_type="spot")
    assert tuple(record) == gr.RECORD_KEYS
    assert record["spot"] is True and record["state"] == "unknown" and record["rdma"] == "none"
    with pytest.raises(KeyError, match="colour"):
        gr.make_record("aws", "us-east-1", "i-1", colour="red")
    with pytest.raises(ValueError, match="charge_type"):
        gr.make_record("aws", "us-east-1", "i-1", charge_type="free")
    with pytest.raises(ValueError, match="rdma"):
        gr.make_record("aws", "us-east-1", "i-1", rdma="carrier-pigeon")


def _record(state="running", count=1, tags=None):
    return gr.make_record("aws", "us-east-1", "i-1", state=state, gpu=gr.gpu_info("A100", count),
                          tags=tags or {})


def test_filters_on_state_tags_and_gpus():
    assert gr.matches(_record())
    assert not gr.matches(_record(count=0))
    assert gr.matches(_record(count=0), gpu_only=False)
    # Default states: everything that still exists.
    assert gr.matches(_record(state="stopped"))
    assert not gr.matches(_record(state="terminated"))
    assert gr.matches(_record(state="terminated"), states=("terminated",))
    assert not gr.matches(_record(state="stopped"), states=("running",))
    tagged = _record(tags={"team": "ml", "env": "prod"})
    assert gr.matches(tagged, tags={"team": "ml"})
    assert gr.matches(tagged, tags={"team": ["infra", "ml"]})
    assert gr.matches(tagged, tags={"env": None})
    assert not gr.matches(tagged, tags={"team": "infra"})
    assert not gr.matches(tagged, tags={"owner": None})
    # Tag values are strings on every cloud; a YAML number still matches.
    assert gr.matches(_record(tags={"gen": "5"}), tags={"gen": 5})


@pytest.mark.parametrize("filters, message", [
    ("running", "expected a mapping"),
    ({"status": ["running"]}, "unknown key 'status'"),
    ({"state": ["runing"]}, "'runing' is not a state"),
    ({"state": 3}, "filters.state: expected a list"),
    ({"tags": ["team"]}, "filters.tags: expected a mapping"),
])
def test_bad_filters_say_what_is_wrong(filters, message):
    with pytest.raises(ValueError, match=message):
        gr.check_filters(filters)


def test_good_filters_are_returned_ready_to_use():
    assert gr.check_filters({}) == (None, {})
    assert gr.check_filters({"state": "running", "tags": {"a": 1}}) == (("running",), {"a": 1})
