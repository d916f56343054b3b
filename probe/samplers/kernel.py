"""What a thread is doing in the kernel, read from /proc (Linux): the frame's second witness.

A thread blocked in a native call that Python code cannot name (``os.preadv`` into a
buffer, a C client library's socket read, a page fault on a mapped file) shows only "a
call, and little CPU" in its frame and CPU clock. The kernel knows more:
``/proc/self/task/TID/syscall`` holds the system call it is blocked in and its
arguments ("running" if it is on a CPU, ``-1`` if it is in the kernel outside any call:
a page fault), and for calls on a file descriptor ``/proc/self/fd/N`` says whether that
is a socket, a pipe or a file; ``/proc/self/task/TID/stat``'s state says D, the
uninterruptible wait of disk I/O.

``KernelStates.read(tid)`` returns the thread's state as one short text -- ``"R"`` (on a
CPU, or runnable), ``"D"`` (uninterruptible, outside any call: a page fault on a mapped
file), ``"sys <call>"`` or ``"sys <call> <socket|pipe|file|other>"`` (in that system
call) -- or ``""`` when nothing can be read. ``reason(state)`` maps it to a wait reason
of the samples table, or ``None`` when the kernel cannot tell: a futex is the GIL as
often as a lock (a thread returning from any native call waits for the GIL on one), and
running or runnable is the CPU.

Where /proc lacks the files or refuses them (not Linux, a hardened kernel, a container
without ptrace read access to itself), ``available`` turns false with the reason in
``unavailable``, and every read returns ``""``: the sampler falls back to frames and CPU
clocks and records that it did. A thread that exits between two reads is just ``""``.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable

__all__ = ["SYSCALLS", "KernelStates", "RunQueueDelays", "reason"]

# System call numbers of the calls a thread blocks in, by machine (the kernel's tables:
# arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h for arm64).
SYSCALLS: dict[str, dict[int, str]] = {
    "x86_64": {
        0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv",
        20: "writev", 23: "select", 35: "nanosleep", 40: "sendfile", 42: "connect",
        43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
        61: "wait4", 72: "fcntl", 73: "flock", 74: "fsync", 75: "fdatasync",
        202: "futex", 208: "io_getevents", 230: "clock_nanosleep", 232: "epoll_wait",
        247: "waitid", 257: "openat", 270: "pselect6", 271: "ppoll", 275: "splice",
        281: "epoll_pwait", 288: "accept4", 295: "preadv", 296: "pwritev",
        299: "recvmmsg", 327: "preadv2", 328: "pwritev2", 426: "io_uring_enter",
        441: "epoll_pwait2",
    },
    "aarch64": {
        4: "io_getevents", 22: "epoll_pwait", 25: "fcntl", 32: "flock", 56: "openat",
        63: "read", 64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64",
        69: "preadv", 70: "pwritev", 71: "sendfile", 72: "pselect6", 73: "ppoll",
        76: "splice", 82: "fsync", 83: "fdatasync", 95: "waitid", 98: "futex",
        101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 203: "connect",
        206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 242: "accept4",
        243: "recvmmsg", 260: "wait4", 286: "preadv2", 287: "pwritev2",
        426: "io_uring_enter", 441: "epoll_pwait2",
    },
}  # fmt: skip

# Calls whose first argument is the descriptor they wait on: what it is decides the wait.
_ON_A_DESCRIPTOR = {
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
    "preadv2", "pwritev2", "sendfile", "splice",
}  # fmt: skip
_DESCRIPTOR_REASON = {"socket": "network", "pipe": "subprocess", "file": "disk"}
_SYSCALL_REASON = {
    "poll": "network", "ppoll": "network", "select": "network", "pselect6": "network",
    "epoll_wait": "network", "epoll_pwait": "network", "epoll_pwait2": "network",
    "accept": "network", "accept4": "network", "connect": "network", "recvfrom": "network",
    "recvmsg": "network", "recvmmsg": "network", "sendto": "network", "sendmsg": "network",
    "nanosleep": "sleep", "clock_nanosleep": "sleep",
    "wait4": "subprocess", "waitid": "subprocess",
    "fsync": "disk", "fdatasync": "disk", "openat": "disk", "io_getevents": "disk",
    "io_uring_enter": "disk",
    "flock": "lock", "fcntl": "lock",
}  # fmt: skip


def reason(state: str) -> str | None:
    """The samples table's wait reason for a state ``read`` returned, or None when the
    kernel cannot tell (see the module docstring)."""
    if state.startswith("D"):
        return "disk"
    parts = state.split(" ")
    if parts[0] != "sys" or len(parts) < 2:
        return None
    if parts[1] in _ON_A_DESCRIPTOR:
        return _DESCRIPTOR_REASON.get(parts[2]) if len(parts) > 2 else None
    return _SYSCALL_REASON.get(parts[1])


class _ReadsHoldingTheGil:
    """``open``/``read``/``close`` and ``readlink`` called from libc through
    ``ctypes.PyDLL``, which keeps the GIL for the call (``os.read`` and ``os.readlink``
    let it go).

    The sampler reads the frames with the GIL held, then asks the kernel where a thread
    is. Were the GIL let go for that read, the thread whose frame was just read would run
    on and the kernel would answer for a later instant: on
    ``sample_services/healthy_service.py`` a response-building loop caught at ``round``
    (a C builtin) was read as "sleeping" 52 times in 615 samples -- by the time of the
    read the request had moved on to its downstream sleep -- so that Python time was
    billed as a wait and its CPU went to the ranking stage (sampled 49% of the run;
    timed in-process 26%, py-spy's on-CPU share 32%). Held, the frame and the kernel
    state are the same instant: a thread that ran Python waits on the GIL's futex until
    the sampler is done, one blocked in a call is still in it."""

    def __init__(self) -> None:
        import ctypes  # deferred: only a sampler that reads the kernel needs it

        libc = ctypes.PyDLL(None, use_errno=True)
        self._ctypes = ctypes
        self._open, self._read, self._close = libc.open, libc.read, libc.close
        self._readlink, self._pread = libc.readlink, libc.pread
        self._open.argtypes, self._open.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
        self._read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        self._read.restype = ctypes.c_ssize_t
        self._close.argtypes, self._close.restype = [ctypes.c_int], ctypes.c_int
        self._readlink.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        self._readlink.restype = ctypes.c_ssize_t
        self._pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        self._pread.restype = ctypes.c_ssize_t
        self._buffer = ctypes.create_string_buffer(512)

    def _error(self, path: str) -> OSError:
        code = self._ctypes.get_errno()
        return OSError(code, os.strerror(code), path)

    def read_text(self, path: str) -> str:
        fd = self._open(os.fsencode(path), os.O_RDONLY | os.O_CLOEXEC)
        if fd < 0:
            raise self._error(path)
        try:
            n = self._read(fd, self._buffer, len(self._buffer))
            if n < 0:
                raise self._error(path)
            return self._buffer.raw[:n].decode("ascii", "replace")
        finally:
            self._close(fd)

    def open_fd(self, path: str) -> int:
        fd = self._open(os.fsencode(path), os.O_RDONLY | os.O_CLOEXEC)
        if fd < 0:
            raise self._error(path)
        return fd

    def pread_text(self, fd: int) -> str:
        """The file open at ``fd`` read again from its start (/proc generates it anew)."""
        n = self._pread(fd, self._buffer, len(self._buffer), 0)
        if n < 0:
            raise self._error(f"fd {fd}")
        return self._buffer.raw[:n].decode("ascii", "replace")

    def read_link(self, path: str) -> str:
        n = self._readlink(os.fsencode(path), self._buffer, len(self._buffer))
        if n < 0:
            raise self._error(path)
        return os.fsdecode(self._buffer.raw[:n])


def _read_text(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 512).decode("ascii", "replace")
    finally:
        os.close(fd)


def _gil_held_readers() -> tuple[Callable[[str], str], Callable[[str], str]]:
    """(read_text, read_link) that keep the GIL, or the os module's where ctypes cannot
    load libc (then a state may be a moment later than its frame)."""
    try:
        reads = _ReadsHoldingTheGil()
    except (ImportError, OSError, AttributeError):
        return _read_text, os.readlink
    return reads.read_text, reads.read_link


def _os_open(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def _os_pread(fd: int) -> str:
    return os.pread(fd, 512, 0).decode("ascii", "replace")


class RunQueueDelays:
    """Each thread's time spent runnable on a run queue, waiting for a CPU: the second
    field of ``/proc/self/task/TID/schedstat`` (ns, cumulative; the kernel adds a wait to
    it when the thread gets its CPU back).

    The frames and the CPU clock cannot tell a thread blocked in a call from one that
    left it and waits for a core: ``render_queue.py``'s worker, beside three CPU-bound
    processes on 2 cores, was seen in ``queue.get`` in 54% of its samples and its stage
    read as lock contention, where its schedstat over the run said 0.92 s on a CPU, 0.97 s
    on a run queue and 0.06 s blocked (/tmp experiment, 2026-11-27). The sampler gives
    each row the delay the thread was credited with in its interval (``queued_ns``).

    A file stays open per thread (re-read with ``pread``: ~2 us, where open, read, close
    take ~10), under the GIL like ``KernelStates``' reads, until ``forget``/``close``,
    for at most ``max_open`` threads, the ones read most recently: the descriptors are
    the target's, and a service with a thread a request (700 threads in 7 s) had as many
    of them open on probe's account, against a soft limit of 1,024 on most hosts.
    Where /proc has no schedstat (a kernel without ``CONFIG_SCHED_INFO``, not Linux), or
    it cannot be opened, ``read`` returns None and ``unavailable`` says why."""

    def __init__(
        self,
        *,
        task_dir: str = "/proc/self/task",
        open_fd: Callable[[str], int] | None = None,
        pread_text: Callable[[int], str] | None = None,
        max_open: int = 64,
    ) -> None:
        self._task_dir = task_dir
        if open_fd is None or pread_text is None:
            try:
                held = _ReadsHoldingTheGil()
                open_fd, pread_text = held.open_fd, held.pread_text
            except (ImportError, OSError, AttributeError):
                open_fd, pread_text = _os_open, _os_pread
        self._open_fd, self._pread_text = open_fd, pread_text
        self._fds: dict[int, int] = {}  # in the order read, the most recent last
        self._max_open = max_open
        self.unavailable = ""

    def read(self, tid: int) -> int | None:
        """The thread's run-queue delay so far (ns), or None where it cannot be read."""
        if self.unavailable:
            return None
        fd = self._fds.pop(tid, None)
        try:
            if fd is None:
                if len(self._fds) >= self._max_open:
                    self.forget(next(iter(self._fds)))  # the one read longest ago
                fd = self._open_fd(f"{self._task_dir}/{tid}/schedstat")
            self._fds[tid] = fd
            return int(self._pread_text(fd).split()[1])
        except (FileNotFoundError, ProcessLookupError):  # the thread has exited
            self.forget(tid)
            return None
        except OSError as e:
            self.forget(tid)
            self.unavailable = f"{self._task_dir}/{tid}/schedstat: {e.strerror or e}"
            return None
        except (ValueError, IndexError):  # not the format this reads
            self.forget(tid)
            self.unavailable = f"{self._task_dir}/{tid}/schedstat: unexpected contents"
            return None

    def forget(self, tid: int) -> None:
        """Close the thread's file (it exited, or is no longer sampled)."""
        fd = self._fds.pop(tid, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        for tid in list(self._fds):
            self.forget(tid)


def _descriptor_kind(link: str) -> str:
    if link.startswith("socket:"):
        return "socket"
    if link.startswith("pipe:"):
        return "pipe"
    if link.startswith("/") and not link.startswith("/dev/"):
        return "file"
    return "other"


class KernelStates:
    """Reads threads' kernel states; see the module docstring. ``task_dir`` and
    ``fd_dir`` are the process's /proc folders (tests pass their own), ``machine`` picks
    the system call table."""

    def __init__(
        self,
        *,
        task_dir: str = "/proc/self/task",
        fd_dir: str = "/proc/self/fd",
        machine: str | None = None,
        read_text: Callable[[str], str] | None = None,
        read_link: Callable[[str], str] | None = None,
    ) -> None:
        self._task_dir, self._fd_dir = task_dir, fd_dir
        if read_text is None or read_link is None:
            held_text, held_link = _gil_held_readers()
            read_text, read_link = read_text or held_text, read_link or held_link
        self._read_text, self._read_link = read_text, read_link
        arch = machine or platform.machine()
        self._calls = SYSCALLS.get(arch, {})
        self.unavailable = "" if self._calls else f"no system call table for {arch}"
        self.reads = 0

    @property
    def available(self) -> bool:
        return not self.unavailable

    @property
    def descriptor_calls(self) -> tuple[int, ...]:
        """The numbers of the system calls whose first argument is the descriptor they
        wait on (``probe._tickpeek`` reads that descriptor's link beside the call)."""
        return tuple(n for n, call in self._calls.items() if call in _ON_A_DESCRIPTOR)

    def read(self, tid: int) -> str:
        """The thread's state now ("" when it cannot be read)."""
        if self.unavailable:
            return ""
        self.reads += 1
        base = f"{self._task_dir}/{tid}"
        try:
            fields = self._read_text(f"{base}/syscall").split()
        except (FileNotFoundError, ProcessLookupError):
            # the thread exited, or is exiting (ESRCH) -- or /proc has no such file: see
            # below, the next thread's read tells
            return ""
        except OSError as e:  # EACCES/EPERM: no ptrace read access to ourselves
            self.unavailable = f"{base}/syscall: {e.strerror or e}"
            return ""
        return self._state(fields, lambda: self._stat_text(base), self._descriptor)

    def state_of(self, syscall: str, extra: str | None) -> str:
        """The state from texts read elsewhere at one instant (the stack sampler's tick,
        ``probe._tickpeek``): the ``syscall`` file's, and ``extra``, the ``stat`` file's
        where the call is -1 or the link of the descriptor a call waits on."""
        if self.unavailable:
            return ""
        kind = _descriptor_kind(extra) if extra is not None else "other"
        return self._state(syscall.split(), lambda: extra, lambda _fd_hex: kind)

    def _state(
        self,
        fields: list[str],
        stat: Callable[[], str | None],
        descriptor: Callable[[str], str],
    ) -> str:
        """The state from the ``syscall`` file's fields; ``stat`` gives the ``stat``
        file's text (None where it cannot be read), ``descriptor`` what a descriptor
        (its number in hex) is: each asked only where the call needs it."""
        if not fields or fields[0] == "running":
            return "R"
        if fields[0] == "-1":  # in the kernel outside a call: a page fault, or preempted
            return _scheduler_state(stat)
        try:
            call = self._calls.get(int(fields[0]), f"#{fields[0]}")
        except ValueError:
            return ""
        if call in _ON_A_DESCRIPTOR and len(fields) > 1:
            return f"sys {call} {descriptor(fields[1])}"
        return f"sys {call}"

    def _stat_text(self, base: str) -> str | None:
        try:
            return self._read_text(f"{base}/stat")
        except OSError:
            return None

    def _descriptor(self, fd_hex: str) -> str:
        try:
            return _descriptor_kind(self._read_link(f"{self._fd_dir}/{int(fd_hex, 16)}"))
        except (OSError, ValueError):
            return "other"


def _scheduler_state(stat: Callable[[], str | None]) -> str:
    """R or D from a thread's ``stat`` text, "" where it says neither or was not read."""
    raw = stat()
    if raw is None:
        return ""
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0] if fields and fields[0] in ("R", "D") else ""
