"""GPUs on a shared server: the hub's pool by profile, NCCL ranks under the rank limit, the grader's
jobs on disjoint devices, and JupyterLab's language in a prepared home. Device lists only: no GPU."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit.grading import devices as grading_devices
from labkit.hub import gpus
from labkit.i18n import set_lang
from labkit.wire import devices as wire
from labkit.wire.errors import OptionError

EIGHT = [str(i) for i in range(8)]

# nvidia-smi -L on a server with one whole GPU and two in MIG mode (three instances each)
NVIDIA_SMI_L = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000000)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1a1b2c3d-0000-0000-0000-000000000000)
  MIG 2g.20gb     Device  0: (UUID: MIG-11111111-0000-0000-0000-000000000000)
  MIG 2g.20gb     Device  1: (UUID: MIG-11111111-0000-0000-0000-000000000001)
  MIG 2g.20gb     Device  2: (UUID: MIG-11111111-0000-0000-0000-000000000002)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-2a1b2c3d-0000-0000-0000-000000000000)
  MIG 3g.40gb     Device  0: (UUID: MIG-22222222-0000-0000-0000-000000000000)
  MIG 3g.40gb     Device  1: (UUID: MIG-22222222-0000-0000-0000-000000000001)
"""


@pytest.fixture(autouse=True)
def english():
    set_lang("en")
    yield
    set_lang(None)


def disjoint(groups: list[tuple[str, ...]]) -> bool:
    every = [d for g in groups for d in g]
    return len(every) == len(set(every))


# -- the hub's pool -------------------------------------------------------------------------


def test_three_students_on_eight_gpus_get_disjoint_devices_within_their_profiles():
    pool = gpus.GpuPool(EIGHT, share=2)
    got = {user: pool.allocate(user, profile) for user, profile in (("ana", "2"), ("ben", "1"), ("eve", "4"))}
    assert got == {"ana": ("0", "1"), "ben": ("2",), "eve": ("3", "4", "5", "6")}  # first fit, pool order
    assert disjoint(list(got.values()))
    assert pool.free() == ["7"]
    assert pool.allocate("ana", "2") == ("0", "1")  # spawned again: what she holds, not two more


def test_an_exhausted_pool_refuses_with_who_holds_what_and_a_stop_gives_back():
    pool = gpus.GpuPool(EIGHT)
    pool.allocate("ana", "4")
    pool.allocate("ben", "3")
    with pytest.raises(gpus.GpuPoolExhausted) as refused:
        pool.allocate("eve", "2")
    message = str(refused.value)
    assert "eve" in message and "2 GPUs are asked, 1 free" in message and "ana: 0, 1, 2, 3" in message
    assert pool.release("ana") == ("0", "1", "2", "3")
    assert pool.allocate("eve", "2") == ("0", "1")
    assert pool.release("nobody") == ()


def test_shared_gpus_are_time_shared_up_to_the_limit_and_never_taken_whole():
    pool = gpus.GpuPool(["0", "1", "2"], share=2)
    assert pool.allocate("s1", "shared") == ("0",)
    assert pool.allocate("s2", "shared") == ("0",)  # the fullest shared GPU with room first
    assert pool.allocate("w1", "1") == ("1",)  # a whole-GPU profile never gets a shared GPU
    assert pool.allocate("s3", "shared") == ("2",)  # GPU 0 is full: the next free one
    assert pool.allocate("s4", "shared") == ("2",)
    with pytest.raises(gpus.GpuPoolExhausted, match="at most 2 students on one"):
        pool.allocate("s5", "shared")
    pool.release("s1")
    assert pool.allocate("s5", "shared") == ("0",)
    pool.release("s3")
    pool.release("s4")
    assert pool.free() == ["2"] and pool.allocate("w2", "1") == ("2",)  # the last sharer gone: whole again


def test_a_mig_pool_from_nvidia_smi():
    devices = gpus.parse_nvidia_smi(NVIDIA_SMI_L)
    assert devices[0] == "0" and len(devices) == 6  # GPU 0 whole; GPUs 1 and 2 as their MIG instances
    assert all(d.startswith("MIG-") for d in devices[1:]) and "GPU-1a1b2c3d" not in " ".join(devices)
    migs = gpus.GpuPool(devices[1:])
    got = [migs.allocate(user, "1") for user in ("ana", "ben", "eve")]
    assert disjoint(got) and all(len(g) == 1 and g[0].startswith("MIG-") for g in got)
    with pytest.raises(gpus.GpuProfileError, match="one MIG"):
        migs.allocate("dan", "2")  # CUDA shows a process one MIG instance
    assert gpus.environment(got[0])["CUDA_VISIBLE_DEVICES"] == got[0][0]


def test_the_pool_setting_and_bad_profiles():
    assert gpus.discover("none") == [] and gpus.discover("") == []
    assert gpus.discover("0, 1,3") == ["0", "1", "3"]
    assert gpus.parse_profiles("ana=2, ben=shared") == {"ana": "2", "ben": "shared"}
    for bad in ("two", "-1"):
        with pytest.raises(gpus.GpuProfileError, match="a number of GPUs"):
            gpus.parse_profile(bad)
    with pytest.raises(gpus.GpuProfileError):
        gpus.parse_profiles("ana:2")
    with pytest.raises(gpus.GpuProfileError, match="twice"):
        gpus.GpuPool(["0", "0"])
    with pytest.raises(gpus.GpuProfileError, match="more GPUs than the pool holds"):
        gpus.GpuPool(["0", "1"]).check("3")
    assert gpus.environment([]) == {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # profile 0


def test_the_spawn_hook_sets_each_servers_devices(monkeypatch, tmp_path):
    """The hub as launch/hub.sh configures it: each server's CUDA_VISIBLE_DEVICES from the pool, and
    labkit in that server takes exactly those (a bare %%torchrun: one rank on each)."""
    pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e .[hub]")
    from test_hub_config import configured

    from labkit.hub import homes, spawners

    monkeypatch.setattr(homes, "prepare_home", lambda user, lang, settings: f"fsdp-course/{lang}")
    configured(
        monkeypatch,
        tmp_path,
        LABKIT_HUB_GPUS=",".join(EIGHT),
        LABKIT_HUB_GPU_PROFILE="2",
        LABKIT_HUB_GPU_PROFILES="ben=1,eve=shared",
        LABKIT_HUB_MAX_RANKS="4",
    )
    servers = {}
    for user in ("ana", "ben", "eve"):
        spawner = SimpleNamespace(user=SimpleNamespace(name=user), user_options={"lang": "ro"}, environment={})
        spawners.pre_spawn(spawner)
        servers[user] = spawner.environment
    given = {u: tuple(wire.parse_visible_devices(e["CUDA_VISIBLE_DEVICES"])) for u, e in servers.items()}
    assert given == {"ana": ("0", "1"), "ben": ("2",), "eve": ("3",)}
    assert disjoint(list(given.values()))
    for user, env in servers.items():  # torch in the server sees only its own (it applies the variable)
        assert wire.default_nproc(env, device_count=len(given[user])) == len(given[user])
        assert env["LABKIT_MAX_RANKS"] == "4" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    spawners.POOL.release("ana")
    assert spawners.POOL.free()[:2] == ["0", "1"]


def test_a_slurm_hub_has_no_pool_and_a_cpu_server_sets_no_devices(monkeypatch, tmp_path):
    pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e .[hub]")
    from test_hub_config import configured

    from labkit.hub import homes, spawners

    configured(monkeypatch, tmp_path, LABKIT_HUB_SPAWNER="slurm", LABKIT_HUB_GPUS="0,1")
    assert spawners.POOL is None  # Slurm gives the GPUs
    configured(monkeypatch, tmp_path, LABKIT_HUB_SPAWNER="local", LABKIT_HUB_GPUS="none")
    assert spawners.POOL is not None and spawners.POOL.devices == []
    monkeypatch.setattr(homes, "prepare_home", lambda user, lang, settings: "fsdp-course/en")
    spawner = SimpleNamespace(user=SimpleNamespace(name="ana"), user_options={}, environment={})
    spawners.pre_spawn(spawner)
    assert "CUDA_VISIBLE_DEVICES" not in spawner.environment
    with pytest.raises(gpus.GpuProfileError):  # a profile the pool can never give: the hub does not start
        configured(monkeypatch, tmp_path, LABKIT_HUB_GPUS="0,1", LABKIT_HUB_GPU_PROFILES="ana=3")


# -- NCCL ranks under the rank limit --------------------------------------------------------


def test_nccl_ranks_count_against_the_rank_limit(monkeypatch):
    from labkit.launch import options

    monkeypatch.setattr(wire, "_torch_device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,4,5")  # a student's four GPUs
    monkeypatch.setenv("LABKIT_MAX_RANKS", "3")
    assert options.resolve(options.config(options.PYTHON, nproc=3, backend="nccl")).nproc == 3
    with pytest.raises(OptionError, match=r"nproc=4 is more than you may start with NCCL: at most 3"):
        options.resolve(options.config(options.PYTHON, nproc=4, backend="nccl"))
    with pytest.raises(OptionError, match="Use nproc=2"):
        wire.check_rank_limit(3, 4, ["2", "3"])  # one rank on each GPU
    monkeypatch.delenv("LABKIT_MAX_RANKS")  # no limit set: the GPUs alone decide
    assert options.resolve(options.config(options.PYTHON, nproc=4, backend="nccl")).nproc == 4


# -- the grader's jobs ----------------------------------------------------------------------


def fake_driver(root: Path, count: int) -> list[str]:
    """/proc/driver/nvidia/gpus as the driver writes it, ``count`` GPUs (minor i at bus 0000:i0:00.0)."""
    uuids = []
    for i in range(count):
        folder = root / f"0000:{i:x}0:00.0"
        folder.mkdir(parents=True)
        uuid = f"GPU-{i:08x}-aaaa-bbbb-cccc-000000000000"
        (folder / "information").write_text(
            f"Model: \t\t NVIDIA H100\nGPU UUID: \t {uuid}\nBus Location: \t {folder.name}\nDevice Minor: \t {i}\n"
        )
        uuids.append(uuid)
    return uuids


def test_three_jobs_over_eight_gpus_get_disjoint_groups(tmp_path):
    uuids = fake_driver(tmp_path / "proc", 8)
    assert grading_devices.grader_devices({}, root=str(tmp_path / "proc")) == uuids
    slots = grading_devices.slots(3, {}, root=str(tmp_path / "proc"))
    assert slots.groups == [tuple(uuids[0:2]), tuple(uuids[2:4]), tuple(uuids[4:6])]  # equal: 2 each
    assert disjoint(slots.groups) and slots.jobs(3) == 3
    few = grading_devices.Slots.split(["0", "1"], 3)
    assert few.groups == [("0",), ("1",)] and few.jobs(3) == 2  # no more jobs at once than GPUs
    with grading_devices.Slots.split([], 3, hidden=True).lease() as env:
        assert env == {"CUDA_VISIBLE_DEVICES": ""}  # the grader was given no GPU: neither are its jobs
    with grading_devices.Slots.split([], 3).lease() as env:
        assert env == {}


def test_a_sandbox_binds_only_its_jobs_gpus(tmp_path):
    uuids = fake_driver(tmp_path / "proc", 8)
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in [f"nvidia{i}" for i in range(8)] + ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]:
        (dev / name).touch()
    files = grading_devices.device_files(f"{uuids[2]},{uuids[3]}", str(dev), str(tmp_path / "proc"))
    assert sorted(os.path.basename(f) for f in files) == [
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia2",
        "nvidia3",
        "nvidiactl",
    ]
    assert len(grading_devices.device_files(None, str(dev), str(tmp_path / "proc"))) == 11  # unset: all
    assert len(grading_devices.device_files("0,1", str(dev), str(tmp_path / "proc"))) == 11  # indices: cannot place
    assert [os.path.basename(f) for f in grading_devices.device_files("", str(dev), str(tmp_path / "proc"))] == [
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidiactl",
    ]


def test_the_bubblewrap_command_binds_the_jobs_devices(monkeypatch, tmp_path):
    from labkit.grading import sandbox

    uuids = fake_driver(tmp_path / "proc", 4)
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"):
        (dev / name).touch()
    real = grading_devices.device_files
    monkeypatch.setattr(sandbox, "gpu_files", lambda v: real(v, str(dev), str(tmp_path / "proc")))
    cmd = sandbox.Bubblewrap().command(["true"], {"CUDA_VISIBLE_DEVICES": uuids[1]}, sandbox.Mounts(), None)
    bound = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dev-bind"]
    assert sorted(os.path.basename(b) for b in bound) == ["nvidia1", "nvidiactl"]
    assert cmd[cmd.index(uuids[1]) - 1] == "CUDA_VISIBLE_DEVICES"


def test_grade_all_runs_three_jobs_on_disjoint_gpus(monkeypatch, tmp_path):
    from labkit.grading import grade

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(EIGHT))  # the grader's eight GPUs
    running: dict[str, str] = {}
    lock = threading.Lock()
    overlaps: list[set[str]] = []

    def fake_run(path, executed, timeout, name, parameters=None, box=None, env=None, seed=None):
        mine = env["CUDA_VISIBLE_DEVICES"]
        with lock:
            others = {d for v in running.values() for d in v.split(",")}
            overlaps.append(others & set(mine.split(",")))
            running[name] = mine
        time.sleep(0.05)
        with lock:
            del running[name]
        return grade.NotebookScore(name, None, grade.NotebookStatus.DIED, message=mine)

    monkeypatch.setattr(grade, "run_notebook", fake_run)
    tasks = [(tmp_path / f"{i}.ipynb", tmp_path / f"{i}.out.ipynb", f"n{i}") for i in range(7)]
    got = grade.grade_all(tasks, 10, 3, None, box=SimpleNamespace(name="none"), env={"LABKIT_HOME": str(tmp_path)})
    used = {r.message for r in got}
    assert used <= {"0,1", "2,3", "4,5"} and len(used) > 1
    assert all(not o for o in overlaps)  # no two jobs at once on one GPU


# -- JupyterLab's language in a prepared home -----------------------------------------------


@pytest.fixture
def home(monkeypatch, tmp_path):
    from labkit.hub import homes
    from labkit.hub.settings import HubSettings

    for lang in ("en", "ro"):
        (tmp_path / "state" / "student" / lang).mkdir(parents=True)
        (tmp_path / "state" / "student" / lang / "00_setup.ipynb").write_text("{}")
    folder = tmp_path / "ana"
    pw = SimpleNamespace(pw_dir=str(folder), pw_uid=os.getuid(), pw_gid=os.getgid())
    monkeypatch.setattr(homes.pwd, "getpwnam", lambda user: pw)
    monkeypatch.setattr(homes.grp, "getgrnam", lambda name: SimpleNamespace(gr_gid=os.getgid(), gr_mem=[]))
    settings = HubSettings(state_dir=str(tmp_path / "state"))
    return folder, lambda lang: homes.prepare_home("ana", lang, settings)


def lab_locale(folder: Path) -> str:
    from labkit.hub import homes

    path = folder.joinpath(*homes.LAB_SETTINGS, homes.LAB_TRANSLATION)
    return json.loads(path.read_text())["locale"]


def test_a_romanian_students_lab_is_romanian_and_an_english_ones_english(home):
    folder, prepare = home
    assert prepare("ro") == "fsdp-course/ro"
    assert lab_locale(folder) == "ro_RO"
    settings = folder / ".jupyter/lab/user-settings/@jupyterlab/translation-extension/plugin.jupyterlab-settings"
    settings.write_text(json.dumps({"locale": "ro_RO", "displayPseudoLanguage": False}))  # the student's own
    prepare("en")  # the next start, in English
    assert json.loads(settings.read_text()) == {"locale": "en", "displayPseudoLanguage": False}


def test_the_language_setting_follows_no_link(home, tmp_path):
    folder, prepare = home
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / ".jupyter").symlink_to(elsewhere)  # a student's link to a place they do not own
    prepare("ro")
    assert list(elsewhere.iterdir()) == []
    (folder / ".jupyter").unlink()
    (folder / ".jupyter").mkdir()
    prepare("ro")
    assert lab_locale(folder) == "ro_RO"
