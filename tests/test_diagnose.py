"""Diagnosis without a launch: recorded evidence in, the error text out (``labkit.launch.diagnose``).

Each folder in ``tests/fixtures/diagnose/`` was recorded from a real run by ``record.py`` there:
the channel messages, each rank's output, torchrun's log, and the error diagnosis returned.
Here the ``Run`` is rebuilt from them (``Run.ingest``, the rank logs read from the folder)
and the same diagnosis must give the same error. Fault numbers: ``docs/faults.md``.
"""

from __future__ import annotations

import json
import os

import pytest

from labkit.i18n import set_lang
from labkit.launch import diagnose
from labkit.launch.run import RankState, Run
from labkit.wire.protocol import Outcome, Status

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "diagnose")
CASES = sorted(d for d in os.listdir(FIXTURES) if os.path.isfile(os.path.join(FIXTURES, d, "case.json")))


@pytest.fixture(autouse=True)
def english():
    set_lang("en")
    yield
    set_lang(None)


def load(name: str) -> tuple[dict, Run, str]:
    """The case, its ``Run`` rebuilt from the recorded messages and logs, and torchrun's log."""
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "case.json")) as f:
        case = json.load(f)
    run = Run(f"{name}{'#1' if case['warm'] else ''}", case["nproc"], "gloo", folder)
    if case["warm"]:  # a warm cell's Run starts with the session's ranks known and running
        for r, s in case["state"].items():
            run.ranks[int(r)].pid, run.ranks[int(r)].connected = s["pid"], True
            run.ranks[int(r)].status = Status.RUNNING
    with open(os.path.join(folder, "messages.jsonl")) as f:
        for line in f:
            run.ingest(json.loads(line))
    for r, s in case["state"].items():  # what the caller changed after the messages (a warm interrupt)
        run.ranks[int(r)].status = Status(s["status"])
    run.flush_logs()
    with open(os.path.join(folder, "agent.log")) as f:
        agent_log = f.read()
    return case, run, agent_log


def diagnose_case(name: str) -> BaseException | None:
    case, run, agent_log = load(name)
    if case["fn"] == "explain":
        (outcome,) = case["args"][:1]
        return diagnose.explain(run, Outcome(outcome), agent_log, **case["kw"])
    return diagnose.root_cause(run, agent_log, **case["kw"])


@pytest.mark.parametrize("name", CASES)
def test_recorded_run_gives_the_recorded_error(name):
    with open(os.path.join(FIXTURES, name, "expected.json")) as f:
        expected = json.load(f)
    error = diagnose_case(name)
    got = (
        None
        if error is None
        else {"type": type(error).__name__, "message": str(error), "rank": getattr(error, "rank", None)}
    )
    assert got == expected


EXPECTED_HEADS = {  # the line a student reads first, per fault
    "f1_raise_at_step": "rank 1 failed at step 3 (cell line 6): ValueError: boom",
    "f2_sys_exit": "rank 1 exited with code 3 (sys.exit)",
    "f3_early_exit": "rank 1 finished early, while rank 0 still waited for it in a collective",
    "f4_sigkill": "rank 1 was killed by SIGKILL (exit -9)",
    # rank 0 fails in the collective with gloo's "connection closed"; torchrun names rank 0 alone
    "f4_sigkill_in_collective": "rank 1 was killed by SIGKILL (exit -9)",
    "f6_sigsegv": "rank 1 was killed by SIGSEGV (exit -11)",
    "f7_hang_timeout": "the run went past its timeout of 15 s; ranks still running: 0, 1",
    "warm_dead_sigkill": "rank 1 was killed by SIGKILL (exit -9)",
}
HINTS = {  # fault -> words of the hint rule that must match it
    "f4_sigkill": "ran out of memory (the OOM killer)",
    "f6_sigsegv": "faulthandler",
    "f3_early_exit": "same collective calls in the same order",
    "cuda_oom_synthetic": "the GPU ran out of memory",
    "nccl_timeout_synthetic": "an NCCL collective timed out",
    "port_in_use": "the port is taken",
    "open_files": "ran out of file descriptors",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_HEADS))
def test_the_first_line_names_the_rank_and_the_cause(name):
    if name not in CASES:
        pytest.skip("not recorded")
    assert str(diagnose_case(name)).startswith(EXPECTED_HEADS[name])


@pytest.mark.parametrize("name", sorted(HINTS))
def test_hint_rules(name):
    if name not in CASES:
        pytest.skip("not recorded")
    assert HINTS[name] in str(diagnose_case(name))


def test_the_hang_report_says_where_the_rank_is():  # F7
    text = str(diagnose_case("f7_hang_timeout"))
    assert "before the collective" in text and "cell line 6: time.sleep(1000)" in text


def test_the_same_failure_on_every_rank_is_not_blamed_on_the_first():  # F28 too
    for name in ("same_error_every_rank", "f28_import_error", "warm_same_error"):
        text = str(diagnose_case(name))
        assert "failed the same way" in text and "because of it" not in text, name


def test_a_warm_cell_tells_each_other_failure_as_its_own():
    text = str(diagnose_case("warm_different_errors"))
    assert "failed too" in text and "because of it" not in text


def test_gloo_peer_lost_is_recognised_in_recorded_stderr():
    """F3's waiting rank got gloo's real "connection closed" error: the peer-lost rule and BROKEN match it."""
    _, run, _ = load("f3_early_exit")
    err = run.ranks[0].error
    assert err and diagnose.PEER_LOST.search(err["message"] + err["traceback"])
    assert "closed its gloo connection" in diagnose.hint_for(err["message"])
    assert diagnose.broken_collective(run) == 0


def test_a_store_connection_lost_with_its_node_is_an_effect_not_a_cause():
    """c10d's TCPStore client, when the node that hosted the store died (a live Slurm run, node n2's
    agent killed): the rank that reports it is told after the rank that vanished with the node."""
    message = "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
    assert diagnose.PEER_LOST.search(message) and diagnose.BROKEN.search(message)


def test_a_rank_that_never_joined_is_named_by_the_key_the_others_waited_for():
    # gloo's wording on torch 2.13 when rank 3 never reached init_process_group (seen once in 8 loaded runs)
    error = {"type": "DistStoreError", "message": "wait timeout after 120000ms, keys: /default_pg/0//cpu//0/3"}
    assert diagnose.waited_for(error) == [3]
    assert diagnose.waited_for({"type": "DistStoreError", "message": "wait timeout after 5ms, keys: /a/1, /a/2"}) == [
        1,
        2,
    ]
    assert diagnose.waited_for({"type": "RuntimeError", "message": "boom"}) == [] == diagnose.waited_for(None)
    assert "never wrote its address" in diagnose.hint_for(f"{error['type']}: {error['message']}")


def test_same_failure_is_type_and_cell_line():
    def failed(type_, line, message):
        return RankState(0, error={"type": type_, "lineno": line, "message": message})

    assert diagnose.same_failure(failed("ValueError", 3, "bad 0"), failed("ValueError", 3, "bad 1"))
    assert not diagnose.same_failure(failed("ValueError", 3, "x"), failed("ValueError", 4, "x"))
    assert not diagnose.same_failure(failed("ValueError", 3, "x"), failed("KeyError", 3, "x"))
    assert diagnose.same_failure(failed("OSError", None, "x"), failed("OSError", None, "x"))
    assert not diagnose.same_failure(failed("OSError", None, "x"), failed("OSError", None, "y"))
    killed = RankState(1, exit_code=-9, signal="SIGKILL")
    assert diagnose.same_failure(killed, RankState(2, exit_code=-9, signal="SIGKILL"))
    assert not diagnose.same_failure(killed, RankState(2, exit_code=1))


def test_agent_log_parsers():
    text = (
        "[W] Sending process 4242 closing signal SIGTERM\n"
        "Failures:\n  time      : 2026-12-02\n  host      : h\n  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : -9 (pid: 4243)\n"
        "labkit: local_rank 1 exitcode -11\nlabkit: local_rank 2 exitcode 1\n"  # labkit.launch.agent's lines
    )
    assert diagnose.agent_stops(text) == {4242: "SIGTERM"}
    assert diagnose.agent_exit_codes(text) == {1: -9, 2: 1}, "torchrun's own report first"
    assert diagnose.signal_name(9) == "SIGKILL" and diagnose.signal_name(999) == "signal 999"


def test_stuck_at_reads_the_main_threads_frames():
    dump = [
        "Thread 0x01 (most recent call first):",
        '  File "/x/threading.py", line 1 in wait',
        "Current thread 0x02 (most recent call first):",
        '  File "<cell>", line 2 in <module>',
        '  File "/x/labkit/ranks/bootstrap.py", line 9 in execute',
        "",
    ]
    assert diagnose.stuck_at(dump, ["import time", "time.sleep(9)"]) == ["cell line 2: time.sleep(9)"]


# -- the same recorded runs, shown: Run.ingest, the summary and the dashboard's HTML, no launch --


def test_a_recorded_run_is_shown_as_the_cell_would_show_it():
    _, run, _ = load("f1_raise_at_step")
    run.error = diagnose_case("f1_raise_at_step")
    assert run.step_times[0] and run.ranks[1].error["type"] == "ValueError"
    text = run.summary()
    assert text.splitlines()[0].startswith("Run f1_raise_at_step: 2 ranks, backend gloo") and "FAILED" in text
    assert "failed" in text.splitlines()[4], "rank 1's row says it failed"

    from labkit.views import dashboard

    table = dashboard.rank_table_html(run)
    assert table.count("<tr class='labkit-rank'") == 2 and f"color:{dashboard.ERROR}" in table
    assert "no memory samples" in dashboard.memory_svg(run)  # the fixtures keep no memory samples


def test_memory_samples_are_kept_with_their_elapsed_time_and_drawn():
    run = Run("run-x", 2, "gloo", FIXTURES)
    for r in (0, 1):
        run.ingest({"t": "hello", "rank": r, "pid": 100 + r})
        for i in range(3):
            run.ingest({"t": "mem", "rank": r, "time": run.started + i, "rss": (i + 1) * 2**20})
    assert [s["elapsed"] for s in run.memory[0]] == pytest.approx([0, 1, 2])
    assert run.main_memory_key() == "rss" and run.main_peak(1) == 3 * 2**20
    assert run.peak_memory[0] == {"rss": 3 * 2**20}, "the time is not a quantity"

    from labkit.views import dashboard

    assert dashboard.memory_svg(run).count("<polyline") == 2


def test_across_nodes_a_rank_without_a_word_is_placed_by_the_node_srun_saw_end_first(tmp_path):
    """A live Slurm run, node n2's agent killed: both ranks vanished at about once, and rank 0's
    channel closed first (seen once in CI); srun's first error names n2, so rank 1 is the cause."""
    from labkit.launch.nodes import failed_nodes

    run = Run("two-nodes", 2, "gloo", str(tmp_path))
    for r, node in [(0, "n1"), (1, "n2")]:
        run.ingest({"t": "hello", "rank": r, "local_rank": 0, "world_size": 2, "pid": 100 + r, "node": node})
    run.ingest({"t": "closed", "rank": 0, "time": 1000.0})
    run.ingest({"t": "closed", "rank": 1, "time": 1000.1})
    log = "srun: error: n2: task 1: Killed\nsrun: error: n1: task 0: Exited with exit code 1\n"
    assert failed_nodes(log) == ("n2", "n1")
    assert failed_nodes("labkit: node 10.0.0.2 exited with code 255\n") == ("10.0.0.2",)
    error = diagnose.root_cause(run, "", failed_nodes=failed_nodes(log))
    assert error.rank == 1 and str(error).startswith("rank 1 stopped without a word")
    # without srun's order the channel's is all there is (one node: unchanged)
    for s in run.ranks.values():
        s.status = Status.RUNNING
    assert diagnose.root_cause(run, "").rank == 0
