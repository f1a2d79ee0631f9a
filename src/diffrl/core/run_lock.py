"""One writer per run directory: an exclusive lock held for the whole training run.

Two trainers writing one run directory (``--resume`` in a second terminal while the first
run is alive, a cluster requeue while the old job still runs) would interleave rows of
``metrics.jsonl`` and write and prune each other's checkpoints. The trainer (process 0 of a
multi-process run) therefore holds ``RUN_DIR/writer.lock`` from start to exit.

Mechanism. ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the lock file is the authority: the kernel
releases it when the holding file descriptor is closed, which includes the process dying
(crash, ``kill -9``, OOM killer), so a lock file left by a dead process is simply taken
over by the next trainer. The file's content, a JSON record (pid, hostname, start time,
command), only serves the messages: who holds the lock when a second writer is refused,
and whose lock was taken over. The record is marked ``released`` on a clean exit; an
unreleased record whose pid no longer runs on this host is a stale lock of a dead process.
A held lock is never broken: if the recorded process is gone but the lock is still held,
some live process has the file open (e.g. a child that inherited the descriptor), and
taking over could make two writers.

Shared file systems. On NFS, Linux implements flock with the server's byte-range locks, so
the lock excludes writers on other machines when the mount supports locking (NFSv4, NFSv3
with lockd); a crashed client's lock is freed when its lease expires (about 90 s on NFSv4).
Mounts with ``local_lock=flock|all`` or ``nolock`` lock only within one machine: there a
second machine is not refused, but the unreleased record of a host that is not this one is
reported as a warning. File systems that refuse flock (e.g. Lustre without the ``flock``
mount option) get a warning and the run proceeds unlocked, as before this lock existed.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path

LOCK_NAME = "writer.lock"
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class RunDirLocked(RuntimeError):
    """Another process holds the run directory's writer lock."""


def pid_running(pid: int) -> bool:
    """Whether a process with this pid exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_record(fd: int) -> dict | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 1 << 16).decode()
        record = json.loads(text) if text.strip() else None
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):  # unreadable or half-written: the holder is unknown
        return None


def _write_record(fd: int, record: dict) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(record).encode())
    os.fsync(fd)


def describe(record: dict | None) -> str:
    if not record:
        return "an unknown process (its lock record is empty or unreadable)"
    return (f"pid {record.get('pid')} on host {record.get('hostname')} (started {record.get('started')}, "
            f"command: {' '.join(map(str, record.get('command') or []))})")


class RunDirLock:
    """``with RunDirLock(run_dir): ...`` holds the writer lock of ``run_dir`` (which must exist).

    Raises :class:`RunDirLocked` naming the holder if another process holds it. After
    ``acquire``, ``previous`` is the unreleased record of a holder whose lock was taken over
    (a run that died), else None.
    """

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.previous: dict | None = None
        self._fd: int | None = None
        self._record: dict | None = None

    def acquire(self) -> "RunDirLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_record(fd)
            os.close(fd)
            raise RunDirLocked(self._refusal(holder)) from None
        except OSError as e:
            os.close(fd)
            if e.errno not in _NO_LOCKS:
                raise
            warnings.warn(f"{self.path.parent}: the file system does not support locks ({e.strerror}); "
                          "training without the one-writer lock: do not resume this run while it is running")
            return self
        previous = _read_record(fd)
        if previous and not previous.get("released"):  # the last writer ended without releasing
            self.previous = previous
            warnings.warn(self._takeover(previous))
        self._record = {"pid": os.getpid(), "hostname": socket.gethostname(),
                        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": sys.argv}
        _write_record(fd, self._record)
        self._fd = fd
        return self

    def release(self) -> None:
        """Mark the record released and close the file (which releases the lock)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            _write_record(fd, {**self._record, "released": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        finally:
            os.close(fd)

    def _refusal(self, holder: dict | None) -> str:
        msg = (f"{self.path.parent} is being written by another training process: {describe(holder)}. "
               "Two writers would interleave metrics.jsonl and prune each other's checkpoints. Wait for it "
               "to finish, or stop it (SIGINT/SIGTERM write a checkpoint), then resume.")
        pid = holder.get("pid") if holder else None
        if isinstance(pid, int) and holder.get("hostname") == socket.gethostname() and not pid_running(pid):
            msg += (f" (pid {holder['pid']} no longer runs, but the lock is still held: another process has "
                    f"{self.path} open, e.g. a child that inherited it; `fuser {self.path}` names it)")
        return msg

    def _takeover(self, previous: dict) -> str:
        msg = f"took over the writer lock of {self.path.parent} from {describe(previous)}, which did not release it"
        if previous.get("hostname") != socket.gethostname():
            msg += ("; if that run is still going (on a file system that locks only within one machine "
                    "this cannot be told), stop one of the two")
        return msg

    def __enter__(self) -> "RunDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
