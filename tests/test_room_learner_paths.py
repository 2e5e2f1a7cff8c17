"""Root never follows a path a learner can write (labkit_room.learner_paths): each way a learner
can swap a private folder (a link, a link above it, a folder of someone else's) is refused in one
line, and the close's copy of their work leaves out links and hard-linked files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit_room import learner_paths, sandbox

ME = os.getuid()
OTHER = 65534 if ME != 65534 else 65533


def _home(tmp_path: Path, name: str = "learner") -> Path:
    home = tmp_path / name
    home.mkdir(mode=0o700)
    sandbox.make_private_folders(home, ME, os.getgid())
    return home


def test_the_private_folders_as_made_open_and_are_the_learners(tmp_path):
    home = _home(tmp_path)
    fds = sandbox.open_private_folders(home, ME)
    try:
        assert set(fds) == {s for s in sandbox.SHARED_FOLDERS if os.path.isdir(s)}
        for shared, fd in fds.items():
            assert os.path.samestat(os.fstat(fd), os.stat(sandbox.private_folder(home, shared)))
    finally:
        for fd in fds.values():
            os.close(fd)


@pytest.mark.parametrize("plant", ["link to another's folder", "link above it", "a file", "missing"])
def test_a_swapped_private_folder_is_refused_in_one_line(tmp_path, plant):
    home, other = _home(tmp_path), _home(tmp_path, "other")
    (other / ".room" / "tmp" / "notebook.ipynb").write_text("the other learner's")
    tmp = sandbox.private_folder(home, "/tmp")
    if plant == "link to another's folder":
        tmp.rmdir()
        tmp.symlink_to(other / ".room" / "tmp")
    elif plant == "link above it":
        for folder in sorted((home / ".room").iterdir()):
            folder.rmdir()
        (home / ".room").rmdir()
        (home / ".room").symlink_to(other / ".room")
    elif plant == "a file":
        tmp.rmdir()
        tmp.write_text("")
    else:
        tmp.rmdir()
    with pytest.raises(learner_paths.LearnerPathError) as refused:
        sandbox.open_private_folders(home, ME)
    line = str(refused.value)
    assert "\n" not in line and "refused" in line and str(home) in line, line


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user's is made with chown: needs root")
def test_a_private_folder_of_someone_elses_is_refused_and_a_home_not_theirs_too(tmp_path):
    home = _home(tmp_path)
    os.chown(sandbox.private_folder(home, "/var/tmp"), OTHER, OTHER)
    with pytest.raises(learner_paths.LearnerPathError, match="another user's"):
        sandbox.open_private_folders(home, ME)
    with pytest.raises(learner_paths.LearnerPathError, match="not owned by its learner"):
        sandbox.open_private_folders(home, OTHER)


def test_the_close_copies_the_learners_files_and_leaves_out_links_and_hard_links(tmp_path):
    home = _home(tmp_path)
    outside = tmp_path / "root-secret.txt"
    outside.write_text("not the learner's")
    work = home / "lab"
    (work / "sub").mkdir(parents=True)
    (work / "00.ipynb").write_text("mine")
    (work / "sub" / "notes.txt").write_text("mine too")
    (work / "link.txt").symlink_to(outside)
    (work / "folder-link").symlink_to(tmp_path)
    os.link(work / "00.ipynb", work / "hard.ipynb")  # two links: either name may be another's file
    os.mkfifo(work / "fifo")
    copied = learner_paths.copy_out(home, "lab", ME, tmp_path / "saved")
    saved = tmp_path / "saved"
    assert (saved / "sub" / "notes.txt").read_text() == "mine too"
    assert sorted(copied.left_out) == ["lab/00.ipynb", "lab/fifo", "lab/folder-link", "lab/hard.ipynb",
                                       "lab/link.txt"]
    assert not (saved / "link.txt").exists() and not (saved / "folder-link").exists()
    assert copied.files == 1 and oct(saved.stat().st_mode)[-3:] == "700"
    (work / "hard.ipynb").unlink()
    again = learner_paths.copy_out(home, "lab", ME, tmp_path / "saved-again")
    assert (tmp_path / "saved-again" / "00.ipynb").read_text() == "mine" and again.files == 2
