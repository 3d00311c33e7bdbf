"""labkit.wire.devices: the GPUs the hub gave us, from CUDA_VISIBLE_DEVICES, never more."""

from __future__ import annotations

import pytest

from labkit.i18n import set_lang
from labkit.wire import devices as gpus
from labkit.wire.errors import OptionError

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


# -- backend auto: NCCL only when every rank gets a GPU of its own ------------------------


@pytest.mark.parametrize(
    ("nproc", "visible", "count", "backend", "fell_back"),
    [
        (2, "0,1", 2, "nccl", False),  # a GPU per rank
        (1, "0,1", 2, "nccl", False),  # fewer ranks than GPUs: still one each
        (4, "0,1", 2, "gloo", True),  # two ranks would share a GPU: NCCL refuses that
        (2, "0", 1, "gloo", True),
        (2, None, 0, "gloo", False),  # a laptop: gloo is what is expected
        (2, "0,1", 0, "gloo", False),  # a CPU-only torch opens none of the named GPUs
        (1, "MIG-4b2f0a6e-7c1d-5e8f-9a0b-1c2d3e4f5a6b", 1, "gloo", True),
    ],
)
def test_auto_picks_nccl_only_with_a_gpu_per_rank(nproc, visible, count, backend, fell_back) -> None:
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    choice = gpus.choose_backend("auto", nproc, env, device_count=count)
    assert (choice.backend, choice.fell_back) == (backend, fell_back)
    assert len(choice.devices) == (nproc if backend == "nccl" else 0)
    assert choice.reason.startswith("backend auto: " + backend)


def test_auto_says_why_it_fell_back_in_both_languages() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "4,6"}
    try:
        set_lang("en")
        en = gpus.choose_backend("auto", 3, env, device_count=2).reason
        set_lang("ro")
        ro = gpus.choose_backend("auto", 3, env, device_count=2).reason
    finally:
        set_lang(None)
    assert "3 ranks need 3 GPUs" in en and "only 2 are yours (4, 6)" in en and "-n 2" in en
    assert "3 ranguri au nevoie de 3 GPU-uri" in ro and "(4, 6)" in ro and "-n 2" in ro
    assert "\u015f" not in ro and "\u0163" not in ro  # the cedilla forms, written as escapes


def test_explicit_backends() -> None:
    assert gpus.choose_backend("gloo", 8, {"CUDA_VISIBLE_DEVICES": "0"}, device_count=1).backend == "gloo"
    choice = gpus.choose_backend("nccl", 2, {"CUDA_VISIBLE_DEVICES": "3,5,7"}, device_count=3)
    assert (choice.backend, choice.devices) == ("nccl", ["3", "5"])
    with pytest.raises(OptionError):
        gpus.choose_backend("nccl", 2, {"CUDA_VISIBLE_DEVICES": "3"}, device_count=1)


def test_resolve_backend_prints_the_reason_only_when_gpus_go_unused(monkeypatch, capsys) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(gpus, "_torch_device_count", lambda: 2)
    set_lang("en")
    try:
        assert gpus.resolve_backend("auto", 4) == "gloo"
        assert "4 ranks need 4 GPUs" in capsys.readouterr().out
        assert gpus.resolve_backend("auto", 4, quiet=True) == "gloo"
        assert gpus.resolve_backend("auto", 2) == "nccl"
        monkeypatch.setattr(gpus, "_torch_device_count", lambda: 0)
        assert gpus.resolve_backend("auto", 2) == "gloo"
        assert capsys.readouterr().out == ""
    finally:
        set_lang(None)


def test_run_options_use_the_decision(monkeypatch) -> None:
    from labkit.launch.options import RunConfig, resolve

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(gpus, "_torch_device_count", lambda: 2)
    assert resolve(RunConfig(quiet=True)).backend == "nccl"  # default nproc: one rank per GPU
    assert resolve(RunConfig(nproc=2, quiet=True)).backend == "nccl"
    assert resolve(RunConfig(nproc=3, quiet=True)).backend == "gloo"
    with pytest.raises(OptionError):
        resolve(RunConfig(nproc=3, backend="nccl"))


# -- in the rank: cuda:LOCAL_RANK first, and a clean fork ----------------------------------


class FakeCuda:
    """Stands in for torch.cuda on a CPU-only torch: records set_device, has the fork flags."""

    def __init__(self, initialized: bool = False, bad_fork: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self._initialized = initialized
        self._is_in_bad_fork = lambda: bad_fork

    def set_device(self, i: int) -> None:
        self.calls.append(("set_device", i))


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    import sys

    import torch

    def install(**kw) -> FakeCuda:
        fake = FakeCuda(**kw)
        monkeypatch.setattr(torch, "cuda", fake)
        monkeypatch.setitem(sys.modules, "torch.cuda", fake)
        return fake

    monkeypatch.setattr(gpus, "_bound", False)
    monkeypatch.delenv(gpus.AUDIT_ENV, raising=False)
    return install


def test_bind_device_sets_the_local_rank_gpu_once(fake_cuda, monkeypatch) -> None:
    import torch

    fake = fake_cuda()
    monkeypatch.setenv("RANK", "11")
    monkeypatch.setenv("LOCAL_RANK", "3")  # rank 11 is GPU 3 of its node, not GPU 11
    assert gpus.bind_device("nccl") == torch.device("cuda", 3)
    assert gpus.bind_device("nccl") == torch.device("cuda", 3)
    assert fake.calls == [("set_device", 3)]


def test_bind_device_leaves_cuda_alone_under_gloo(fake_cuda) -> None:
    fake = fake_cuda()
    assert gpus.bind_device("gloo") is None
    assert fake.calls == []


@pytest.mark.parametrize("flags", [{"initialized": True}, {"bad_fork": True}])
def test_a_rank_forked_from_a_cuda_parent_says_so(fake_cuda, monkeypatch, flags) -> None:
    fake = fake_cuda(**flags)
    monkeypatch.setenv("RANK", "1")
    set_lang("en")
    try:
        with pytest.raises(gpus.CudaForkError, match="rank 1: CUDA was initialised in torchrun's agent"):
            gpus.bind_device("nccl")
    finally:
        set_lang(None)
    assert fake.calls == []  # refused before touching CUDA
