"""Kernel states from /proc, on fake /proc files; and the sampler's use of them."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time

import pytest

from probe.samplers.kernel import KernelStates, reason

from .test_stack_sampler import Clock, frame_running_python, make


def fake_proc(files: dict[str, str], links: dict[str, str] | None = None, *, error=None):
    def read_text(path: str) -> str:
        if error is not None:
            raise error
        if path not in files:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        return files[path]

    def read_link(path: str) -> str:
        return (links or {})[path]

    return KernelStates(
        task_dir="/t", fd_dir="/fd", machine="x86_64", read_text=read_text, read_link=read_link
    )


def test_a_read_blocked_on_a_file_is_disk_and_on_a_socket_is_network():
    k = fake_proc(
        {"/t/7/syscall": "295 0x5 0x7f 0x1 0x0 0x0 0x0 0x7ffd 0x7f1", "/t/8/syscall": "0 0x9 0x1"},
        {"/fd/5": "/data/shard-0.bin", "/fd/9": "socket:[81234]"},
    )
    assert k.read(7) == "sys preadv file" and reason(k.read(7)) == "disk"
    assert k.read(8) == "sys read socket" and reason(k.read(8)) == "network"


def test_a_page_fault_outside_any_call_is_disk_by_its_d_state():
    k = fake_proc({"/t/7/syscall": "-1 0x7ffd 0x7f1", "/t/7/stat": "7 (py (x)) D 1 2 3"})
    assert k.read(7) == "D" and reason("D") == "disk"


def test_futex_and_running_leave_the_cpu_rule_to_decide():
    k = fake_proc({"/t/7/syscall": "202 0x7f 0x89 0x0", "/t/8/syscall": "running"})
    assert k.read(7) == "sys futex" and reason("sys futex") is None  # GIL or lock
    assert k.read(8) == "R" and reason("R") is None


def test_sleeps_child_waits_and_pipes_have_their_reasons():
    assert reason("sys clock_nanosleep") == "sleep"
    assert reason("sys wait4") == "subprocess"
    assert reason("sys read pipe") == "subprocess"
    assert reason("sys epoll_wait") == "network"
    assert reason("sys read other") is None  # a tty, an eventfd: nothing to say


def test_a_thread_that_exited_reads_as_nothing_and_keeps_the_reader_available():
    k = fake_proc({})
    assert k.read(7) == "" and k.available


def test_a_thread_caught_exiting_reads_as_nothing_and_keeps_the_reader_available():
    # /proc/self/task/TID/syscall of a thread between its exit and its reaping fails with
    # ESRCH: a thread-per-request server does this all the time (search_flask turned the
    # reader off 0.3 s into its run).
    k = fake_proc({}, error=ProcessLookupError(errno.ESRCH, "No such process"))
    assert k.read(7) == "" and k.available
    assert k.read(8) == "" and k.reads == 2


def test_a_refused_proc_file_turns_the_reader_off_with_the_reason():
    k = fake_proc({}, error=PermissionError(errno.EACCES, "Permission denied"))
    assert k.read(7) == ""
    assert not k.available and "Permission denied" in k.unavailable
    assert k.read(8) == "" and k.reads == 1  # not asked again


def test_an_unknown_machine_has_no_table_and_reads_nothing():
    k = KernelStates(machine="riscv64")
    assert not k.available and "riscv64" in k.unavailable and k.read(1) == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_real_threads_blocked_in_the_kernel_read_as_what_they_wait_on():
    a, b = socket.socketpair()
    r, w = os.pipe()
    threads = [
        threading.Thread(target=a.recv, args=(1,)),
        threading.Thread(target=os.read, args=(r, 1)),
        threading.Thread(target=time.sleep, args=(0.5,)),
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(0.1)
        k = KernelStates()
        if not k.available:
            pytest.skip(k.unavailable)
        states = [k.read(t.native_id) for t in threads]
        assert [reason(s) for s in states] == ["network", "subprocess", "sleep"], states
    finally:
        b.send(b"x")
        os.write(w, b"x")
        for t in threads:
            t.join()
        for f in (a, b):
            f.close()
        os.close(r)
        os.close(w)


class FixedStates:
    available, unavailable = True, ""

    def __init__(self, state: str) -> None:
        self.state, self.reads = state, 0

    def read(self, tid: int) -> str:
        self.reads += 1
        return self.state


def started_in_its_call(reader, *args):
    """Start ``reader(*args)`` (one call, on its first line) on a thread; its frame once
    blocked in that call."""
    t = threading.Thread(target=reader, args=args)
    t.start()
    frame = None
    for _ in range(200):
        frame = sys._current_frames()[t.ident]
        if frame.f_code is reader.__code__ and frame.f_lineno == reader.__code__.co_firstlineno + 1:
            break
        time.sleep(0.005)
    return t, frame


def blocked_reading_a_pipe(read):
    """A live frame blocked in ``read(fd)`` on an empty pipe, until the generator ends."""
    r, w = os.pipe()
    t, frame = started_in_its_call(read, r)
    yield frame
    os.write(w, b"x")
    t.join()
    os.close(r)
    os.close(w)


@pytest.fixture
def frame_at_unnamed_call():
    """A live frame blocked in a call no wait rule names (``os.readv`` on a pipe)."""

    def read(fd):
        os.readv(fd, [bytearray(1)])

    yield from blocked_reading_a_pipe(read)


def test_an_unnamed_native_call_mostly_off_cpu_takes_the_kernel_s_reason(frame_at_unnamed_call):
    clock = Clock()
    cpu = {1: 0}
    states = FixedStates("sys preadv file")
    s = make({1: frame_at_unnamed_call}, cpu, clock, kernel_states=states)
    s.sample()
    clock.now = 10_000_000
    cpu[1] = 1_000_000  # 10% on CPU: in doubt
    s.sample()
    [row] = s.drain()["samples"]
    assert row[5] == "disk" and row[7] == "sys preadv file"
    assert states.reads == 1


def test_the_kernel_is_not_asked_about_a_thread_on_cpu_or_beyond_the_budget(
    frame_at_unnamed_call,
):
    frame = frame_at_unnamed_call
    clock = Clock()
    cpu = {1: 0, 2: 0, 3: 0}
    states = FixedStates("sys futex")
    s = make({1: frame, 2: frame, 3: frame}, cpu, clock, kernel_states=states, max_kernel_reads=1)
    s.sample()
    clock.now = 10_000_000
    cpu[1] = 10_000_000  # ran throughout: no doubt
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert rows[1][7] == "" and rows[1][5] == ""
    assert states.reads == 1 and s.kernel_reads_skipped == 1  # threads 2 and 3: one read
    assert {rows[2][5], rows[3][5]} == {"gil"}  # a futex leaves the CPU rule to decide


def test_a_native_call_on_a_cpu_while_another_thread_ran_is_the_scheduler_s_not_the_gil(
    frame_at_unnamed_call,
):
    # two threads hashing with the GIL released, each short of a full core: a thread
    # waiting for the GIL sleeps on a futex, one the kernel reads as "R" wanted a core
    clock = Clock()
    cpu = {1: 0, 2: 0}
    s = make(
        {1: frame_at_unnamed_call, 2: frame_at_unnamed_call},
        cpu,
        clock,
        kernel_states=FixedStates("R"),
    )
    s.sample()
    clock.now = 10_000_000
    cpu[1] = cpu[2] = 9_000_000
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert [rows[t][5] for t in (1, 2)] == ["unknown", "unknown"]


@pytest.fixture
def frame_at_socket_recv():
    """A live frame blocked in ``sock.recv`` (a call the wait rules name: network)."""
    a, b = socket.socketpair()

    def reader():
        a.recv(1)

    t, frame = started_in_its_call(reader)
    yield frame
    b.send(b"x")
    t.join()
    a.close()
    b.close()


def test_a_socket_call_that_returned_waits_for_the_gil_or_a_cpu_not_the_network(
    frame_at_socket_recv,
):
    # an event loop's non-blocking send while pool threads hold the GIL: on a futex;
    # one the kernel has on a CPU or runnable is not waiting on the network either
    cases = (("sys futex", "gil"), ("R", "unknown"), ("sys recvfrom socket", "network"))
    for state, expected in cases:
        assert reason_beside_a_busy_thread(frame_at_socket_recv, state) == expected, state


def reason_beside_a_busy_thread(frame, state: str) -> str:
    """The wait reason of a thread in ``frame``, on a CPU 10% of a tick while another
    thread ran Python 90% of it, the kernel reading ``state``."""
    clock = Clock()
    cpu = {1: 0, 2: 0}
    s = make({1: frame, 2: frame_running_python()}, cpu, clock, kernel_states=FixedStates(state))
    s.sample()
    clock.now = 10_000_000
    cpu[1], cpu[2] = 1_000_000, 9_000_000
    s.sample()
    return {r[1]: r for r in s.drain()["samples"]}[1][5]


@pytest.fixture
def frame_at_os_read():
    """A live frame blocked in ``os.read`` on a pipe (a call the wait rules name: disk)."""

    def read(fd):
        os.read(fd, 1)

    yield from blocked_reading_a_pipe(read)


def test_a_call_named_like_a_file_s_takes_what_its_descriptor_is_from_the_kernel(
    frame_at_os_read,
):
    # a logging handler's write to a full stderr pipe read as "disk"; blocked on a pipe
    # it waits for the process reading it, on a socket for the network
    cases = (
        ("sys read pipe", "subprocess"),
        ("sys read socket", "network"),
        ("sys read file", "disk"),
        ("D", "disk"),
        ("sys futex", "gil"),
        ("R", "disk"),  # the kernel at its I/O work (an fsync's writeback)
        ("", "disk"),  # no kernel reading: the frame's name stands
    )
    for state, expected in cases:
        assert reason_beside_a_busy_thread(frame_at_os_read, state) == expected, state


class StatesAfterTheThreadMoved(FixedStates):
    """The kernel's answer comes once thread 1 has moved on to ``moved_to`` (the GIL was
    taken from the sampler between its frame read and its kernel read), or stayed."""

    def __init__(self, state: str, frames: dict, moved_to) -> None:
        super().__init__(state)
        self.frames, self.moved_to = frames, moved_to

    def read(self, tid: int) -> str:
        if self.moved_to is not None:
            self.frames[1] = self.moved_to
        return super().read(tid)


@pytest.mark.parametrize("moved", [False, True])
def test_a_blocked_state_read_after_the_thread_moved_on_is_not_taken_for_its_frame_s(
    frame_at_unnamed_call, moved
):
    # healthy_service.py: Python caught at `round` was read as sleeping, the kernel being
    # asked once the request had moved on to its downstream sleep
    clock = Clock()
    cpu = {1: 0, 2: 0}
    frames = {1: frame_at_unnamed_call, 2: frame_running_python()}
    states = StatesAfterTheThreadMoved(
        "sys clock_nanosleep", frames, frame_running_python() if moved else None
    )
    s = make(frames, cpu, clock, kernel_states=states)
    s.sample()
    clock.now = 10_000_000
    cpu[1], cpu[2] = 1_000_000, 9_000_000  # thread 1 mostly off a CPU: the kernel is asked
    s.sample()
    row = next(r for r in s.drain()["samples"] if r[1] == 1)
    assert row[5] == ("gil" if moved else "sleep")
    assert s.kernel_states_stale == moved


def test_a_thread_still_in_its_call_keeps_the_kernel_s_reason_though_its_cpu_clock_moved(
    frame_at_unnamed_call,
):
    # O_DIRECT reads: the kernel's work in the call is the thread's CPU time
    clock = Clock()
    cpu = {1: 0}

    class StatesWhileTheCallWorks(FixedStates):
        def read(self, tid):
            cpu[1] += 50_000
            return super().read(tid)

    s = make({1: frame_at_unnamed_call}, cpu, clock, kernel_states=StatesWhileTheCallWorks("D"))
    s.sample()
    clock.now = 10_000_000
    cpu[1] = 1_000_000
    s.sample()
    [row] = s.drain()["samples"]
    assert row[5] == "disk" and s.kernel_states_stale == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_the_default_readers_read_proc_as_the_os_module_does_and_raise_its_errors():
    k = KernelStates()
    me = threading.get_native_id()
    fields = k._read_text(f"/proc/self/task/{me}/stat").split(") ")[0]
    with open(f"/proc/self/task/{me}/stat") as f:
        assert fields == f.read().split(") ")[0]
    assert k._read_link("/proc/self/exe") == os.readlink("/proc/self/exe")
    with pytest.raises(FileNotFoundError):
        k._read_text("/proc/self/task/0/syscall")
    with pytest.raises(FileNotFoundError):
        k._read_link("/proc/self/fd/100000")


def test_run_queue_delays_are_the_second_schedstat_field_and_fail_soft(tmp_path):
    from probe.samplers.kernel import RunQueueDelays

    for tid, text in ((11, "912 3456 7\n"), (12, "garbled\n")):
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "schedstat").write_text(text)
    delays = RunQueueDelays(task_dir=str(tmp_path))
    assert delays.read(11) == 3456
    (tmp_path / "11" / "schedstat").write_text("999 4000 8\n")
    assert delays.read(11) == 4000  # the same open file, read again from its start
    assert delays.read(13) is None and delays.unavailable == ""  # a thread that exited
    assert delays.read(12) is None and "unexpected" in delays.unavailable
    assert delays.read(11) is None  # unavailable: no more reads
    delays.close()


def test_run_queue_delay_of_a_real_thread_is_read_from_proc():
    from probe.samplers.kernel import RunQueueDelays

    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"):
        pytest.skip("no schedstat on this kernel")
    delays = RunQueueDelays()
    first = delays.read(threading.get_native_id())
    assert first is not None and first >= 0 and delays.unavailable == ""
    assert delays.read(threading.get_native_id()) >= first  # cumulative
    delays.close()


def test_run_queue_delays_keep_at_most_max_open_files_the_most_recently_read(monkeypatch):
    from probe.samplers import kernel

    opened: list[str] = []
    closed: list[int] = []
    fds = iter(range(100, 200))

    def open_fd(path: str) -> int:
        opened.append(path)
        return next(fds)

    monkeypatch.setattr(kernel.os, "close", closed.append)  # fake descriptors
    delays = kernel.RunQueueDelays(
        task_dir="/t", open_fd=open_fd, pread_text=lambda fd: f"1 {fd} 1", max_open=2
    )
    assert [delays.read(t) for t in (1, 2, 1, 3)] == [100, 101, 100, 102]
    assert closed == [101]  # thread 2's: read longest ago when 3 came
    assert delays.read(2) == 103 and closed == [101, 100]  # reopened, 1's let go
    assert len(opened) == 4 and opened[-1] == "/t/2/schedstat"
    delays.close()
    assert sorted(closed) == [100, 101, 102, 103]
