"""The open room's watch (labkit_room.control) under a learner's fork-and-exit load: processes that
come and go between two reads of /proc never make it raise, and a round that fails for any reason is
said and skipped, the room kept open."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from labkit_room import control

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

STORM = textwrap.dedent("""
    import os, random, time
    end, alive = time.monotonic() + 8, 0
    while time.monotonic() < end:
        if alive >= 16:
            os.wait(); alive -= 1
        try:
            if os.fork() == 0:
                time.sleep(random.uniform(0.0005, 0.005)); os._exit(0)
            alive += 1
        except OSError:
            time.sleep(0.001)
""")


def test_the_watch_reads_the_hubs_children_under_a_fork_and_exit_load(tmp_path, capsys):
    storms = [subprocess.Popen([sys.executable, "-c", STORM]) for _ in range(2)]
    this = control.Room(state_dir=tmp_path, room_id="r1", learners=[], public_url="http://127.0.0.1:1")
    try:
        rounds, deadline = 0, time.monotonic() + 5
        while time.monotonic() < deadline:
            children = dict(control._children_of(storms[0].pid))  # reads each process once: never a TypeError
            assert all(isinstance(start, int) for start in children.values())
            control._watch_once(this, 1)
            rounds += 1
    finally:
        for storm in storms:
            storm.kill()
            storm.wait()
    assert rounds > 20
    assert "skipped a round" not in capsys.readouterr().out
    assert (tmp_path / "state.json").is_file()


def test_a_round_that_fails_is_said_and_the_room_stays_open(tmp_path, capsys, monkeypatch):
    this = control.Room(state_dir=tmp_path, room_id="r1", learners=[], public_url="http://127.0.0.1:1")

    def gone(_pid):
        raise TypeError("'NoneType' object is not subscriptable")  # what a process gone mid-read once gave

    monkeypatch.setattr(control, "_children_of", gone)
    control._watch_once(this, 1)  # no exception: the room's loop goes on
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "the room stays open" in out and "TypeError" in out
