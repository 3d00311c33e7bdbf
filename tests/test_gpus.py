"""labkit.gpus: the GPUs the hub gave us, from CUDA_VISIBLE_DEVICES, never more."""

from __future__ import annotations

import pytest

from labkit import gpus
from labkit.errors import OptionError
from labkit.i18n import set_lang

UUID_A = "GPU-8f6c1a2b-1111-2222-3333-444455556666"
UUID_B = "GPU-0d3e9f10-aaaa-bbbb-cccc-ddddeeeeffff"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0,1", ["0", "1"]),
        ("2, 3", ["2", "3"]),
        ("", []),
        ("-1", []),
        ("0,-1,1", ["0"]),  # CUDA stops at the first invalid entry
        ("1,1", ["1"]),  # a repeated GPU is not a second GPU
        (f"{UUID_A},{UUID_B}", [UUID_A, UUID_B]),
        ("MIG-4b2f0a6e-7c1d-5e8f-9a0b-1c2d3e4f5a6b", ["MIG-4b2f0a6e-7c1d-5e8f-9a0b-1c2d3e4f5a6b"]),
        ("nvidia0", []),
    ],
)
def test_parse_visible_devices(value: str, expected: list[str]) -> None:
    assert gpus.parse_visible_devices(value) == expected


def test_visible_gpus_follow_the_allocation_not_the_machine() -> None:
    # the node has 8 GPUs (so torch sees 8 without the variable); the hub gave us 2 and 5
    assert gpus.visible_gpus({}, device_count=8) == [str(i) for i in range(8)]
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,5"}, device_count=2) == ["2", "5"]


def test_device_count_only_narrows() -> None:
    # torch opens fewer than the variable names (a CPU-only torch, a cgroup): fewer, never more
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, device_count=2) == ["0", "1"]
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, device_count=0) == []
    # torch seeing more than we were given must not widen the allocation
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "3"}, device_count=8) == ["3"]
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, device_count=8) == []


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUID_A},{UUID_B}")
    monkeypatch.setattr(gpus, "_torch_device_count", lambda: 2)
    assert gpus.visible_gpus() == [UUID_A, UUID_B]
    assert gpus.default_nproc() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert gpus.visible_gpus() == []
    assert gpus.default_nproc() == gpus.CPU_NPROC


def test_this_machine_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real torch here is a CPU build: whatever the variable says, no GPU can be opened
    import torch

    if torch.cuda.device_count() > 0:
        pytest.skip("this machine has a GPU")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert gpus.visible_gpus() == []
    assert gpus.default_nproc() == 2


def test_default_nproc() -> None:
    assert gpus.default_nproc({"CUDA_VISIBLE_DEVICES": "4,5,6"}, device_count=3) == 3
    assert gpus.default_nproc({}, device_count=0) == 2


def test_check_nccl_returns_the_gpus_the_ranks_use() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "4,6,7"}
    assert gpus.check_nccl(2, env, device_count=3) == ["4", "6"]
    assert gpus.check_nccl(3, env, device_count=3) == ["4", "6", "7"]


def test_check_nccl_too_many_ranks_names_the_gpus_and_gloo() -> None:
    set_lang("en")
    try:
        with pytest.raises(OptionError) as err:
            gpus.check_nccl(4, {"CUDA_VISIBLE_DEVICES": "4,6"}, device_count=2)
        msg = str(err.value)
        assert "4, 6" in msg and "CUDA_VISIBLE_DEVICES='4,6'" in msg
        assert "nproc=2" in msg and "gloo" in msg
    finally:
        set_lang(None)


def test_check_nccl_without_gpus() -> None:
    set_lang("en")
    try:
        with pytest.raises(OptionError, match="gloo") as err:
            gpus.check_nccl(1, {}, device_count=0)
        assert "0 CUDA device" in str(err.value)
        with pytest.raises(OptionError, match="CUDA_VISIBLE_DEVICES=''"):
            gpus.check_nccl(2, {"CUDA_VISIBLE_DEVICES": ""}, device_count=8)
    finally:
        set_lang(None)


def test_messages_in_romanian() -> None:
    set_lang("ro")
    try:
        with pytest.raises(OptionError) as err:
            gpus.check_nccl(3, {"CUDA_VISIBLE_DEVICES": "0"}, device_count=1)
        msg = str(err.value)
        assert "dumneavoastră" in msg and "\u015f" not in msg and "\u0163" not in msg
    finally:
        set_lang(None)
