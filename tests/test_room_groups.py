"""A control group per learner (labkit_room.groups): the writer against stand-in hierarchies in
a temporary folder (v2 and v1, as this box's kernel would lay them out), which of them `detect`
picks from a mount table, and then against this box's own hierarchy, whichever it mounts: a cap
that ends a process past it, a task count that refuses a fork, a freeze and kill that catch a
process re-forking every millisecond. The real ones need root and a writable hierarchy and skip
otherwise, saying so; CI's machine runs them on v1, the GPU box on v2 (docs/INSTRUCTOR_GUIDE.md says how)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit_room import groups

LIMITS = groups.GroupLimits(memory_bytes=3 * 2**30, tasks=256)


def _v2(tmp_path: Path) -> groups.Hierarchy:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    mounts = f"cgroup2 {tmp_path} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
    return groups.detect(root=tmp_path, mounts_text=mounts, own_text="0::/\n", systemd=False, euid=0)


def test_v2_is_picked_from_the_mount_table_and_written_as_the_kernel_lays_it_out(tmp_path):
    hierarchy = _v2(tmp_path)
    assert hierarchy.version == "v2" and {"memory", "pids", "cpu"} <= set(hierarchy.controllers)
    hierarchy.prepare("r1", learners=30)
    # The controllers pass down: enabled at the root (the box left them off), then in the room's group.
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    room = tmp_path / "labkit-r1"
    assert (room / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (room / "cpu.weight").read_text() == "3000"  # the room weighs as its 30 learners
    (room / "labkit-learner01").mkdir()
    (room / "labkit-learner01" / "memory.swap.max").write_text("max")  # the kernel makes it where swap is counted
    hierarchy.create("r1", "labkit-learner01", LIMITS)
    group = room / "labkit-learner01"
    assert (group / "memory.max").read_text() == str(LIMITS.memory_bytes)
    assert (group / "memory.swap.max").read_text() == "0"
    assert (group / "pids.max").read_text() == "256" and (group / "cpu.weight").read_text() == "100"
    hierarchy.join("r1", "labkit-learner01", 4242)
    assert (group / "cgroup.procs").read_text() == "4242" and hierarchy.pids("r1", "labkit-learner01") == [4242]
    (group / "cgroup.freeze").write_text("0")  # the kernel's own file, from 5.2 on
    (group / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    assert hierarchy.freeze("r1", "labkit-learner01") and (group / "cgroup.freeze").read_text() == "1"
    (group / "cgroup.procs").write_text("")
    (group / "cgroup.kill").write_text("")
    assert hierarchy.kill("r1", "labkit-learner01") == [] and (group / "cgroup.kill").read_text() == "1"
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    (group / "memory.current").write_text("1234")
    assert hierarchy.usage("r1", "labkit-learner01")["oom_kills"] == 2
    hierarchy.remove("r1", "labkit-learner01")
    hierarchy.remove("r1")
    assert not room.exists()


def test_the_hierarchy_travels_to_the_spawner_whole(tmp_path):
    hierarchy = _v2(tmp_path)
    assert groups.Hierarchy.from_json(hierarchy.to_json()) == hierarchy


def _v1(tmp_path: Path) -> groups.Hierarchy:
    for folder in ("memory/job/7", "pids", "cpu,cpuacct", "freezer"):
        (tmp_path / folder).mkdir(parents=True)
    mounts = "".join(f"cgroup {tmp_path / name} cgroup rw,nosuid,nodev,noexec,relatime,{options} 0 0\n"
                     for name, options in (("memory", "memory"), ("pids", "pids"), ("cpu,cpuacct", "cpu,cpuacct"),
                                           ("freezer", "freezer")))
    mounts += f"cgroup2 {tmp_path / 'unified'} cgroup2 rw 0 0\n"  # a hybrid box: v2 beside, holding nothing
    own = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/job/7\n1:cpu,cpuacct:/\n0::/\n"
    return groups.detect(root=tmp_path, mounts_text=mounts, own_text=own, systemd=False, euid=0)


def test_v1_nests_each_controllers_groups_under_the_hubs_own(tmp_path):
    hierarchy = _v1(tmp_path)
    assert hierarchy.version == "v1" and hierarchy.controllers == ("memory", "pids", "cpu", "freezer")
    assert hierarchy.mounts["memory"] == tmp_path / "memory" / "job" / "7"  # inside the hub's own memory group
    hierarchy.prepare("r1", learners=2)
    assert (hierarchy.folders("r1")["cpu"] / "cpu.shares").read_text() == "2048"
    folders = hierarchy.folders("r1", "labkit-learner01")
    folders["memory"].mkdir(parents=True)
    (folders["memory"] / "memory.memsw.limit_in_bytes").write_text("")  # a box that counts swap
    hierarchy.create("r1", "labkit-learner01", LIMITS)
    assert (folders["memory"] / "memory.limit_in_bytes").read_text() == str(LIMITS.memory_bytes)
    assert (folders["memory"] / "memory.memsw.limit_in_bytes").read_text() == str(LIMITS.memory_bytes)
    assert (folders["pids"] / "pids.max").read_text() == "256"
    assert (folders["cpu"] / "cpu.shares").read_text() == "1024"
    hierarchy.join("r1", "labkit-learner01", 99)
    assert all((f / "cgroup.procs").read_text() == "99" for f in folders.values())
    (folders["freezer"] / "freezer.state").write_text("FROZEN")
    assert hierarchy.freeze("r1", "labkit-learner01")
    hierarchy.remove("r1", "labkit-learner01")
    hierarchy.remove("r1")
    assert not any(f.exists() for f in hierarchy.folders("r1").values())


def test_no_group_where_the_box_gives_none(tmp_path):
    assert groups.detect(euid=1000).why_not == "not root"
    none = groups.detect(root=tmp_path, mounts_text="proc /proc proc rw 0 0\n", own_text="", systemd=False, euid=0)
    assert not none.enforces and "no writable cgroup hierarchy" in none.describe()
    assert groups.detect(systemd=True, euid=0).version == "systemd"
    assert groups.Hierarchy("none").kill("r1", "x") == []  # nothing to end, nothing refused


def test_a_systemd_hosts_servers_start_in_a_scope_with_the_learners_limits():
    hierarchy = groups.Hierarchy("systemd", ("memory", "pids", "cpu", "freezer"))
    words = groups.systemd_prefix(hierarchy, "r1", "labkit-learner01", LIMITS)
    assert words[:2] == ["systemd-run", "--scope"] and words[-1] == "--"
    assert f"--property=MemoryMax={LIMITS.memory_bytes}" in words and "--property=TasksMax=256" in words
    assert "--property=CPUWeight=100" in words
    # The scope holds the server's reaper, which stays root (out of the learner's reach) and starts
    # the server as the learner: systemd-run itself must not become the learner.
    assert not [w for w in words if w.startswith(("--uid", "--gid"))], words
    assert "--unit=labkit-r1-labkit-learner01.scope" in words


# -- this box's own groups -------------------------------------------------------------------------

_BOX = groups.detect()
needs_groups = pytest.mark.skipif(_BOX.version not in ("v1", "v2"),
                                  reason=f"no cgroup v1 or v2 the room can write here ({_BOX.describe()})")


@pytest.fixture
def box_group():
    room_id = f"test{os.getpid()}"
    _BOX.prepare(room_id)
    _BOX.create(room_id, "learner", groups.GroupLimits(memory_bytes=100 * 2**20, tasks=32))
    try:
        yield room_id
    finally:
        _BOX.kill(room_id, "learner")
        _BOX.remove(room_id, "learner")
        _BOX.remove(room_id)


def _in_group(room_id: str, code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: _BOX.join(room_id, "learner"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@needs_groups
def test_this_boxs_group_caps_memory_counts_tasks_and_its_kill_catches_a_reforking_process(box_group):
    hog = _in_group(box_group, "x = bytearray(300 * 2**20); x[::4096] = b'1' * len(x[::4096]); print('survived')")
    out, _ = hog.communicate(timeout=120)
    assert hog.returncode == -9 and "survived" not in out  # the group's cap: the OOM killer
    assert _BOX.usage(box_group, "learner")["oom_kills"] >= 1
    forks = _in_group(box_group, "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
                                 "            os.close(1); os.close(2); time.sleep(60); os._exit(0)\n"
                                 "        n += 1\nexcept OSError:\n    print(n)\n")
    started = int(forks.communicate(timeout=120)[0].strip())
    assert 0 < started < 32
    _BOX.kill(box_group, "learner")
    reforking = _in_group(box_group, "import os, time\nwhile True:\n    try:\n        if os.fork(): os._exit(0)\n"
                                     "    except OSError:\n        pass\n    time.sleep(0.001)\n")
    reforking.wait(30)  # its first parent exits at once; its line goes on
    time.sleep(0.5)
    seen = _BOX.pids(box_group, "learner")
    assert seen, "the re-forking process is not in its group"
    _BOX.kill(box_group, "learner")
    time.sleep(0.5)
    assert _BOX.pids(box_group, "learner") == []
    assert not [pid for pid in seen if Path(f"/proc/{pid}").exists()
                and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
