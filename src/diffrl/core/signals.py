"""SIGINT/SIGTERM during training: acknowledged at once, a checkpoint, then a telling exit status.

The first signal asks the trainer to stop after the chunk in flight and write a checkpoint;
the run then exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), so a
scheduler or script can tell an interrupted run from a finished one. A second signal stops at
once. Before the first chunk of this process has run (building, compiling, restoring), the
first signal already stops at once: nothing has been trained since the last checkpoint.

Why a watcher thread. Python runs signal handlers in the main thread between bytecodes, and
the main thread spends most of a run inside one long XLA call (compiling, or running a
chunk): a handler would wait for it, up to minutes, before anyone saw the signal. The C-level
handler writes the signal number to a wake-up pipe (``signal.set_wakeup_fd``) immediately;
this thread, blocked on that pipe, prints the acknowledgement and, where stopping at once is
right, ends the process with ``os._exit``. It first takes the trainer's write lock, which is
held while a checkpoint, a metrics row or the summary is being written, so an immediate stop
never leaves a half-written file (checkpoints are also atomic renames: a ``.tmp-*`` directory
left by a stop is ignored and removed by the next save).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(signum: int) -> int:
    """The shell's convention for a process ended by signal ``signum``: 128 + signum."""
    return 128 + int(signum)


def _say(text: str) -> None:
    """Write one line to stderr straight through the file descriptor (the main thread may be
    inside a rich live display or blocked in XLA; Python's buffered stderr is not needed)."""
    try:
        os.write(sys.stderr.fileno(), f"\n[diffrl] {text}\n".encode())
    except (OSError, ValueError):
        pass


class StopOnSignal:
    """``with StopOnSignal(request_stop, run_dir) as stop:`` routes SIGINT/SIGTERM as described
    above; ``stop.training()`` marks the point from which the first signal waits for a
    checkpoint, ``stop.write_lock`` guards writes, ``stop.signum`` is the first signal received."""

    def __init__(self, request_stop: Callable[[], None], run_dir, resumed: bool = False) -> None:
        self.request_stop = request_stop
        self.run_dir = run_dir
        self.resumed = resumed
        self.write_lock = threading.RLock()
        self.signum: int | None = None
        self._count = 0
        self._training = False
        self._installed = False

    def training(self) -> None:
        """From now on a first signal finishes the chunk and writes a checkpoint."""
        self._training = True

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is not threading.main_thread():
            return self  # signals stay with the caller
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:  # the Python-level handler does nothing: the watcher acts
            signal.signal(sig, lambda *_: None)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._installed = True
        threading.Thread(target=self._watch, name="diffrl-signals", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if not self._installed:
            return
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._write)  # ends the watcher's read
        self._installed = False

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._read, 16)
            except OSError:
                return
            if not data:
                os.close(self._read)
                return
            for signum in data:
                if signum in STOP_SIGNALS:
                    self._on_signal(signal.Signals(signum))

    def _on_signal(self, sig: signal.Signals) -> None:
        self._count += 1
        if self.signum is None:
            self.signum = int(sig)
        resume = f"diffrl train --resume {self.run_dir}"
        if not self._training:
            self._stop_now(sig, f"{sig.name}: stopping now: nothing trained yet"
                           + (f" since the last checkpoint; continue with `{resume}`" if self.resumed else
                              "; no checkpoint was written (start the run again)"))
        if self._count == 1:
            self.request_stop()
            _say(f"{sig.name}: stopping after this chunk: checkpoint will be written "
                 f"(send it again to stop at once, keeping the last complete checkpoint)")
            return
        self._stop_now(sig, f"{sig.name} again: stopping now; the last complete checkpoint is kept, "
                            f"continue with `{resume}`")

    def _stop_now(self, sig: signal.Signals, text: str) -> None:
        """Exit with 128 + the first signal's number once no file is being written."""
        with self.write_lock:
            _say(text)
            os._exit(exit_status(self.signum or sig))
