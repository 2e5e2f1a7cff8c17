"""Root's only way into a learner's files: by open folder descriptors, never by a path a learner can
write.

A learner owns their home and everything in it, and may at any moment replace a folder there with
a symbolic link (to another learner's folder, to a file of root's), a hard link to a file of
someone else's, or a folder moved in from elsewhere. Root, following such a path by name, would act
on the target: bind another learner's folder into this learner's view, copy a file it has no
business copying. So every step root takes in a learner's home (the spawner binding the private
folders, the close saving the notebooks) goes through here: the home is opened once, each name
below it is opened relative to the folder above (``openat``) with ``O_NOFOLLOW``, and each is
checked after it is open (``fstat``): a folder, or a regular file with one link, owned by the
learner. Anything else is refused with one line (:class:`LearnerPathError`), or, in a copy, left out
and counted.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LearnerPathError(OSError):
    """A path in a learner's home is not what the room made (one line, for the learner and the log)."""


def _describe(info: os.stat_result | None) -> str:
    if info is None:
        return "missing"
    if stat.S_ISLNK(info.st_mode):
        return "a link"
    if not stat.S_ISDIR(info.st_mode):
        return "not a folder"
    return "a folder of another user's"


def open_home(home: Path, uid: int) -> int:
    """A descriptor of `home`, a folder owned by `uid` (its parent, /home, is root's: the learner cannot
    swap the home itself, but it is checked all the same)."""
    try:
        fd = os.open(home, _DIR_FLAGS)
    except OSError as err:
        raise LearnerPathError(f"{home} cannot be opened as a folder ({err.strerror}): refused") from None
    info = os.fstat(fd)
    if info.st_uid != uid:
        os.close(fd)
        raise LearnerPathError(f"{home} is not owned by its learner: refused")
    return fd


def open_folder(home: Path, relative: str | Path, uid: int, *, create: bool = False, mode: int = 0o700) -> int:
    """A descriptor of `home`/`relative`, each name opened below the one before without following a link,
    each a folder owned by `uid`; with `create`, a missing name is made (as root, then given to `uid`).
    Raises :class:`LearnerPathError` naming the first name that is a link, not a folder, or not the
    learner's."""
    fd = open_home(home, uid)
    walked = Path("~")
    try:
        for name in Path(relative).parts:
            if name in ("", ".", "..") or "/" in name:
                raise LearnerPathError(f"{walked / name}: not a plain name: refused")
            walked = walked / name
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                    os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    info = None
                raise LearnerPathError(f"{walked} in {home} is {_describe(info)}, not a folder of the learner's: "
                                       "refused (remove it and start the server again)") from None
            os.close(fd)
            fd = child
            info = os.fstat(fd)
            if info.st_uid != uid:
                raise LearnerPathError(f"{walked} in {home} is {_describe(info)}, not a folder of the learner's: "
                                       "refused (remove it and start the server again)")
        return fd
    except BaseException:
        os.close(fd)
        raise


@dataclass
class Copied:
    """What :func:`copy_out` copied and what it left out (links, hard-linked or foreign files, others)."""

    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)


def copy_out(home: Path, relative: str, uid: int, dest: Path, limit_bytes: int = 2**31) -> Copied:
    """Copy the learner's folder `home`/`relative` into `dest` (made, root's, mode 0700): regular files
    the learner owns with one link each, folders the learner owns; every other entry (a link, a
    hard-linked file, a device, a fifo, a file of someone else's) is left out and named. Never
    follows a link; reads each file through a descriptor it has checked."""
    done = Copied()
    top = open_folder(home, relative, uid)
    dest.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.chmod(dest, 0o700)
    _copy_folder(top, dest, uid, Path(relative), done, limit_bytes)
    return done


def _copy_folder(fd: int, dest: Path, uid: int, where: Path, done: Copied, limit_bytes: int) -> None:
    try:
        with os.scandir(fd) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:  # gone since the listing
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    done.left_out.append(str(where / name))
                    continue
                if (os.fstat(child).st_ino, os.fstat(child).st_uid) != (info.st_ino, uid):
                    os.close(child)
                    done.left_out.append(str(where / name))
                    continue
                (dest / name).mkdir(mode=0o700, exist_ok=True)
                _copy_folder(child, dest / name, uid, where / name, done, limit_bytes)
            elif stat.S_ISREG(info.st_mode):
                _copy_file(fd, name, dest / name, uid, where / name, done, limit_bytes)
            else:
                done.left_out.append(str(where / name))
    finally:
        os.close(fd)


def _copy_file(fd: int, name: str, target: Path, uid: int, where: Path, done: Copied, limit_bytes: int) -> None:
    try:
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        done.left_out.append(str(where))
        return
    try:
        info = os.fstat(src)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_nlink != 1
                or done.bytes + info.st_size > limit_bytes):
            done.left_out.append(str(where))
            return
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(out, "wb") as sink:
            while chunk := os.read(src, 1 << 20):
                sink.write(chunk)
                done.bytes += len(chunk)
        done.files += 1
    finally:
        os.close(src)
