"""A rank's output as a terminal shows it: tqdm's carriage-return progress lines."""

from __future__ import annotations

from labkit.launch.logs import LOG_LINE_CHARS, RankLog, render_cr


def test_carriage_return_overwrites_as_a_terminal_does():
    assert render_cr(b"abc") == b"abc"
    assert render_cr(b"downloading 10%\rdownloading 50%\rdone") == b"doneloading 50%"  # no clearing: overwrite
    assert render_cr(b"step 1/3\rstep 2/3\rstep 3/3") == b"step 3/3"
    assert render_cr(b"windows line\r") == b"windows line"


def test_a_tqdm_bar_is_one_changing_line(tmp_path):
    from tqdm import tqdm

    log = RankLog(0, str(tmp_path))
    err = open(tmp_path / "rank0.err", "w")
    print("before", file=err, flush=True)
    bar = tqdm(total=2000, file=err, mininterval=0, miniters=1, ascii=True, desc="train")
    for i in range(1000):  # 1000 redraws, no newline: a ~100 kB line without the \r rendering
        bar.update(1)
        err.flush()
        if i == 500:
            log.poll()
            assert log.last_line.startswith("train:  25%") and "501/2000" in log.last_line  # the bar as drawn now
            assert log.stderr.splitlines()[-1] == log.last_line
    log.poll()
    assert "1000/2000" in log.last_line and log.live["stderr"] == log.last_line
    bar.close()
    print("after", file=err, flush=True)
    err.close()
    log.flush()
    lines = log.stderr.splitlines()
    assert lines[0] == "before" and lines[-1] == "after" and len(lines) == 3, lines
    assert lines[1].startswith("train:  50%") and "1000/2000" in lines[1] and len(lines[1]) < LOG_LINE_CHARS
    assert log.dropped["stderr"] == 0
