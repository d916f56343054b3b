"""What a waiting thread waits on, read from its leaf Python frame.

A thread blocked in C (``time.sleep``, ``sock.recv``, ``lock.acquire``) shows no frame
for the C function: its leaf Python frame sits on the ``CALL`` instruction. We recover
the callee's name from the bytecode before that ``CALL`` (walking back over the
arguments with ``dis.stack_effect``), e.g. ``time.sleep`` or ``sock.recv_into``, and
classify from the callee name and the leaf frame's module. Results are cached per
(code object, instruction offset), so the bytecode is read once per call site.

Reasons are the run directory's ``BLOCKING_REASONS`` (``probe.rundir.schema``):
``network``, ``disk``, ``sleep``, ``lock`` (locks, queues, events, futures, joins),
``subprocess``, ``gpu_sync``; the sampler adds the runnable ones, ``gil`` and ``unknown``,
for threads that did not get a CPU.
"""

from __future__ import annotations

import dis
import os
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from types import CodeType

__all__ = ["WaitClassifier", "callee_at", "enclosing_reason", "module_path"]

# Stdlib modules inside which any blocking is of one kind, whatever the call.
_MODULE_REASON = {
    "socket.py": "network",
    "ssl.py": "network",
    "selectors.py": "network",
    "http/client.py": "network",
    "urllib/request.py": "network",
    "asyncio/base_events.py": "network",
    "asyncio/selector_events.py": "network",
    "threading.py": "lock",
    "queue.py": "lock",
    "concurrent/futures/_base.py": "lock",
    "concurrent/futures/thread.py": "lock",
    "asyncio/locks.py": "lock",
    "subprocess.py": "subprocess",
    "multiprocessing/connection.py": "subprocess",
    "multiprocessing/popen_fork.py": "subprocess",
    "multiprocessing/pool.py": "lock",
    "torch/cuda/__init__.py": "gpu_sync",
    "torch/cuda/streams.py": "gpu_sync",
}

# Stdlib modules that decide what any blocking below them waits on, wherever the leaf is:
# `subprocess.run(..., capture_output=True)` waits for its child in communicate's poll on
# the child's pipes, whose leaf (selectors.py) alone reads as a network wait.
_ENCLOSING_REASON = {"subprocess.py": "subprocess"}

# Callee names (the attribute or global called) and what blocking in them means.
_CALL_REASON = {
    # blocked on entering a `with` block whose __enter__ is C: a Lock/RLock/Condition's
    # acquire (a context manager written in Python would show a frame of its own)
    "__enter__": "lock",
    "sleep": "sleep",
    "usleep": "sleep",
    # network
    "recv": "network",
    "recv_into": "network",
    "recvfrom": "network",
    "recvfrom_into": "network",
    "recvmsg": "network",
    "send": "network",
    "sendall": "network",
    "sendto": "network",
    "sendmsg": "network",
    "accept": "network",
    "connect": "network",
    "connect_ex": "network",
    "create_connection": "network",
    "getaddrinfo": "network",
    "gethostbyname": "network",
    "urlopen": "network",
    "getresponse": "network",
    "select": "network",
    "poll": "network",
    "epoll": "network",
    "do_handshake": "network",
    # disk
    "read": "disk",
    "readinto": "disk",
    "readline": "disk",
    "readlines": "disk",
    "write": "disk",
    "writelines": "disk",
    "flush": "disk",
    "fsync": "disk",
    "fdatasync": "disk",
    "open": "disk",
    "stat": "disk",
    "listdir": "disk",
    "scandir": "disk",
    "read_bytes": "disk",
    "read_text": "disk",
    "write_bytes": "disk",
    "write_text": "disk",
    "copyfileobj": "disk",
    "sendfile": "disk",
    "pread": "disk",
    "pwrite": "disk",
    # locks, queues, events, futures. Not `put`, `join` or `result`: the leaf is the
    # innermost frame, so its call is one written in C, and every blocking put, join and
    # result is Python (queue.Queue, Thread, Process, concurrent's Future) while the C
    # ones return at once (SimpleQueue.put, str.join, asyncio's Future.result). Named
    # here, a main thread seen on ThreadPoolExecutor.submit's `_work_queue.put` while
    # waiting for a CPU read as a lock wait, 14% of the run, on a host short of cores.
    "acquire": "lock",
    "wait": "lock",
    "wait_for": "lock",
    "get": "lock",
    "as_completed": "lock",
    "_wait_for_tstate_lock": "lock",
    # children
    "waitpid": "subprocess",
    "wait4": "subprocess",
    "waitid": "subprocess",
    "communicate": "subprocess",
    "check_output": "subprocess",
    "check_call": "subprocess",
    # GPU synchronisation: blocking in these means the host waits for the device
    "synchronize": "gpu_sync",
    "cudaDeviceSynchronize": "gpu_sync",
    "cudaStreamSynchronize": "gpu_sync",
    "item": "gpu_sync",
}

# A callee whose name alone is ambiguous, decided by what it is called on.
_OWNER_REASON = {
    ("subprocess", "run"): "subprocess",
    ("subprocess", "call"): "subprocess",
    ("os", "read"): "disk",
    ("os", "write"): "disk",
    ("requests", "get"): "network",
    ("requests", "post"): "network",
    ("session", "get"): "network",
    ("session", "post"): "network",
    ("client", "get"): "network",
    ("client", "post"): "network",
    ("asyncio", "sleep"): "sleep",
}

_LOADS = {
    "LOAD_METHOD",
    "LOAD_ATTR",
    "LOAD_GLOBAL",
    "LOAD_NAME",
    "LOAD_FAST",
    "LOAD_DEREF",
    "LOAD_CLOSURE",
    "LOAD_FAST_CHECK",
    "LOAD_SUPER_ATTR",
}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}
_CALLS = {"CALL", "PRECALL", "CALL_KW", "CALL_FUNCTION_EX"}
_MATMUL_OPS = {4, 17}  # BINARY_OP's NB_MATRIX_MULTIPLY and NB_INPLACE_MATRIX_MULTIPLY


class _Ins:
    """One instruction: the fields of ``dis.Instruction`` the walk reads, its ``argval``
    worked out only when asked (a name a call loads)."""

    __slots__ = ("_code", "arg", "offset", "opcode", "opname")

    def __init__(self, code: CodeType, offset: int, opcode: int, arg: int | None) -> None:
        self._code = code
        self.offset = offset
        self.opcode = opcode
        self.opname = dis.opname[opcode]
        self.arg = arg

    @property
    def argval(self) -> object:
        return _argval(self._code, self.opcode, self.arg or 0)


_Instructions = Sequence[_Ins | dis.Instruction]

# How far a name's index is shifted in its oparg (the low bits are flags).
_NAME_SHIFT = {dis.opmap["LOAD_GLOBAL"]: 1}
if sys.version_info >= (3, 12):
    _NAME_SHIFT.update({dis.opmap["LOAD_ATTR"]: 1, dis.opmap["LOAD_SUPER_ATTR"]: 2})
_HASNAME, _HASLOCAL, _HASCONST = (
    set(dis.hasname),
    set(dis.haslocal) | set(dis.hasfree),
    set(dis.hasconst),
)
# The bytes are read directly on the versions whose encoding this follows, checked
# against dis instruction by instruction, names included (tests/unit/test_waits.py on
# the tests' Python; 3.12.1 once, 2026-12-02: 47,905 instructions alike); dis elsewhere.
_RAW_BYTECODE = sys.version_info[:2] in ((3, 11), (3, 12))
_CACHE, _EXTENDED_ARG = dis.opmap.get("CACHE", -1), dis.EXTENDED_ARG


def _argval(code: CodeType, opcode: int, arg: int) -> object:
    if opcode in _HASNAME:
        return code.co_names[arg >> _NAME_SHIFT.get(opcode, 0)]
    if opcode in _HASLOCAL:
        return code._varname_from_oparg(arg)  # type: ignore[attr-defined]
    if opcode in _HASCONST:
        return code.co_consts[arg]
    return arg


def _instructions(code: CodeType) -> _Instructions:
    """The code's instructions, without its inline caches and EXTENDED_ARG prefixes.

    Read from the bytes, not through ``dis.get_instructions``: dis builds every field of
    every instruction (positions, argrepr...), ~5 us each -- 1-2 ms for one of uvicorn's
    or asyncio's functions, with the GIL, on the sampler's thread, each time a sample
    lands on a call in a function whose decoding is no longer cached, and a busy server
    shows new call sites for minutes. Read directly, 0.1-0.2 ms (a call site classified
    cold: 1.5 ms -> 0.3 ms, the mean of the 98 calls in four of uvicorn's, Starlette's
    and asyncio's busiest functions, 2026-12-02; `benchmarks/call_site_cost.py`, 7x
    in one run since); a site on no call is not decoded."""
    if not _RAW_BYTECODE:
        return [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    raw = code.co_code
    out: list[_Ins] = []
    extended = 0
    for offset in range(0, len(raw), 2):
        op = raw[offset]
        if op == _CACHE:
            continue
        if op == _EXTENDED_ARG:  # the next instruction's arg, high bits first
            extended = (raw[offset + 1] | extended) << 8
            continue
        arg = raw[offset + 1] | extended if op >= dis.HAVE_ARGUMENT else None
        extended = 0
        out.append(_Ins(code, offset, op, arg))
    return out


def callee_at(code: CodeType, lasti: int, ins: _Instructions | None = None) -> str:
    """``owner.name`` of the function called at ``lasti`` (``""`` if not a call)."""
    if ins is None:
        ins = _instructions(code)
    index = next((k for k, i in enumerate(ins) if i.offset == lasti), None)
    if index is None:
        return ""
    if ins[index].opname == "BINARY_OP" and ins[index].arg in _MATMUL_OPS:
        # `a @ b` runs a matrix product in native code (numpy, torch) without a CALL:
        # marked so analysis counts it as native time, not as interpreting Python.
        return "operator.matmul"
    if ins[index].opname == "BEFORE_WITH":
        return _with_target(ins, index)
    if ins[index].opname not in _CALLS:
        return ""
    call = ins[index]
    argc = 1 if call.opname == "CALL_FUNCTION_EX" else (call.arg or 0)
    # Walk back over the arguments: the instruction at which the net stack growth
    # reaches argc + 1 pushed the callable (LOAD_METHOD/LOAD_ATTR push it with self).
    produced = 0
    k = index - 1
    # 3.11 splits a call into PRECALL n + CALL n (dis gives each a share of the net
    # effect): skip this call's own PRECALL and KW_NAMES, keep those of nested calls.
    # A frame can sit on either: once warm, the adaptive interpreter specialises PRECALL
    # to call a builtin itself (PRECALL_NO_KW_BUILTIN_O: a hot `time.sleep(x)` blocks
    # there, not on CALL).
    while k >= 0 and ins[k].opname in ("PRECALL", "KW_NAMES"):
        k -= 1
    while k >= 0:
        i = ins[k]
        try:
            produced += dis.stack_effect(
                i.opcode, i.arg if i.opcode >= dis.HAVE_ARGUMENT else None, jump=False
            )
        except ValueError:
            return ""
        if produced >= argc + 1:
            break
        k -= 1
    if k < 0 or ins[k].opname not in _LOADS:
        return ""
    # `time.sleep` may load `time` with the NULL slot (the walk stops there) and then
    # replace it by its attribute: follow the attribute chain to the callable itself.
    while k + 1 < index and ins[k + 1].opname in _ATTRS:
        k += 1
    return _loaded_name(ins, k)


def _loaded_name(ins: _Instructions, k: int) -> str:
    """``owner.name`` of what instruction ``k`` loads (an attribute of a loaded name), or
    the name alone."""
    name = str(ins[k].argval)
    if ins[k].opname in _ATTRS and k > 0 and ins[k - 1].opname in _LOADS:
        return f"{ins[k - 1].argval}.{name}"
    return name


def _with_target(ins: _Instructions, index: int) -> str:
    """``owner.name.__enter__`` for a frame on ``BEFORE_WITH``: it is inside the context
    manager's ``__enter__``, and one written in C that blocks is a lock's acquire (``with
    self._lock:`` has no Python frame of its own: issue 12's convoy read as CPU)."""
    k = index - 1
    if k < 0 or ins[k].opname not in _ATTRS | _LOADS:
        return "__enter__"
    return f"{_loaded_name(ins, k)}.__enter__"


# Operators that CPython 3.11 specialises for built-in operands (ints, floats, str,
# list/tuple/dict subscripts). Once the code is warm, such an instruction that is still
# in its generic or adaptive form had operands it could not specialise for: an
# extension type such as a numpy array, whose operator runs native code.
_OPERATOR_SITES = {"@binop", "@subscr"}
_SPECIALISABLE_BINOPS = {0, 5, 10, 13, 18, 23}  # + * - and their in-place forms
# dis names every opcode, specialised ones included (CPython 3.11+; absent elsewhere,
# and then operators simply count as Python).
_ALL_OPMAP: dict[str, int] = getattr(dis, "_all_opmap", {})
_UNSPECIALISED = {
    _ALL_OPMAP[n]
    for n in ("BINARY_OP", "BINARY_OP_ADAPTIVE", "BINARY_SUBSCR", "BINARY_SUBSCR_ADAPTIVE")
    if n in _ALL_OPMAP
}
_ADAPTIVE_CODE = hasattr(CodeType, "_co_code_adaptive") and len(_UNSPECIALISED) == 4


def _operator_site(ins: _Instructions, lasti: int) -> str:
    """``@binop``/``@subscr`` for an operator whose operand types decide native or not."""
    if not _ADAPTIVE_CODE:
        return ""
    i = next((i for i in ins if i.offset == lasti), None)
    if i is None:
        return ""
    if i.opname == "BINARY_SUBSCR":
        return "@subscr"
    if i.opname == "BINARY_OP" and i.arg in _SPECIALISABLE_BINOPS:
        return "@binop"
    return ""


def _operator_callee(code: CodeType, lasti: int, site: str) -> str:
    """``operator.*`` if the live instruction is still unspecialised (native operands)."""
    try:
        op = code._co_code_adaptive[lasti]  # type: ignore[attr-defined]
    except (AttributeError, IndexError):
        return ""
    if op not in _UNSPECIALISED:
        return ""
    return "operator.getitem" if site == "@subscr" else "operator.binop"


# Where the tables' module paths start: the standard library, and any installed package
# (torch's keys). A file of the user's own named `queue.py` is not the stdlib's.
_STDLIB = os.path.dirname(os.__file__).replace(os.sep, "/") + "/"
_PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")


def module_path(filename: str) -> str:
    """``filename`` from its package root (``concurrent/futures/_base.py``), or ``""``
    for a file outside the standard library and installed packages."""
    path = filename.replace(os.sep, "/")
    # packages first: site-packages usually sits inside the standard library's folder
    # (lib/python3.11/site-packages), whose prefix would leave "site-packages/torch/..."
    for marker in _PACKAGE_DIRS:
        at = path.rfind(marker)
        if at >= 0:
            return path[at + len(marker) :]
    if path.startswith(_STDLIB):
        return path[len(_STDLIB) :]
    return ""


def _module_reason(table: dict[str, str], filename: str) -> str | None:
    return table.get(module_path(filename))


def enclosing_reason(filenames: Iterable[str]) -> str | None:
    """The reason a blocking leaf's callers impose (``_ENCLOSING_REASON``), or None."""
    for filename in filenames:
        reason = _module_reason(_ENCLOSING_REASON, filename)
        if reason is not None:
            return reason
    return None


# The instructions a site can be named by (callee_at, _operator_site): a leaf on any
# other is running Python, and its code need not be decoded at all.
_SITE_OPCODES = frozenset(
    dis.opmap[n] for n in (*_CALLS, "BINARY_OP", "BINARY_SUBSCR", "BEFORE_WITH") if n in dis.opmap
)


def _may_name_a_callee(code: CodeType, lasti: int) -> bool:
    raw = code.co_code
    return 0 <= lasti < len(raw) and raw[lasti] in _SITE_OPCODES


def _line_at(code: CodeType, lasti: int) -> int:
    """The source line of the instruction at ``lasti`` (the function's first if none)."""
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


class WaitClassifier:
    """Maps a leaf (code object, instruction offset) to (callee, base reason, line).

    The base reason is what a thread blocked there waits on, or ``None`` when the leaf is
    not a known blocking call: such a thread is runnable, and waits for the GIL or a CPU.
    Lookups are keyed by ``id(code)`` (code objects hash by content, which is slow) and
    the code object is kept in the entry, so an id is never reused while cached.

    A site's answer is kept for the run (a few small fields). The decoded instructions
    it was read from are kept only for the last ``code_cache`` code objects: new sites
    of one function come in bursts, and kept for every function sampled they grew the
    service's memory with the run (a FastAPI app under uvicorn: ~6 MB of
    ``dis.Instruction`` tuples in 16 s, a probe-made "leak" of ~0.2 MB/s).
    """

    def __init__(self, code_cache: int = 16) -> None:
        self._sites: dict[tuple[int, int], tuple[CodeType, str, str | None, int]] = {}
        self._code: OrderedDict[int, tuple[CodeType, _Instructions]]
        self._code = OrderedDict()
        self._code_cache = code_cache

    def classify(self, code: CodeType, lasti: int) -> tuple[str, str | None, int]:
        hit = self._sites.get((id(code), lasti))
        if hit is None or hit[0] is not code:
            hit = (code, *self._classify(code, lasti))
            self._sites[(id(code), lasti)] = hit
        if hit[1] in _OPERATOR_SITES:
            return _operator_callee(code, lasti, hit[1]), None, hit[3]
        return hit[1], hit[2], hit[3]

    def _code_info(self, code: CodeType) -> _Instructions:
        info = self._code.get(id(code))
        if info is not None and info[0] is code:
            self._code.move_to_end(id(code))
            return info[1]
        ins = _instructions(code)
        self._code[id(code)] = (code, ins)
        self._code.move_to_end(id(code))
        if len(self._code) > self._code_cache:
            self._code.popitem(last=False)
        return ins

    def _classify(self, code: CodeType, lasti: int) -> tuple[str, str | None, int]:
        line = _line_at(code, lasti)
        if _RAW_BYTECODE and not _may_name_a_callee(code, lasti):
            return "", None, line  # a Python instruction: no call, nothing decoded
        ins = self._code_info(code)
        site = _operator_site(ins, lasti)
        if site:
            return site, None, line
        callee = callee_at(code, lasti, ins)
        if not callee:
            return "", None, line
        owner, _, name = callee.rpartition(".")
        reason = _OWNER_REASON.get((owner.lower(), name))
        if reason is None:
            reason = _module_reason(_MODULE_REASON, code.co_filename)
            if reason == "lock" and name not in _CALL_REASON:
                # Every call that blocks in a module of locks is named (acquire, wait,
                # get, join, __enter__...). Its other calls (a release, a list's append,
                # a constructor) return at once: a thread seen on one waits after it for
                # the GIL. Read as lock waits, they left bins of a GIL-bound pool with
                # "nothing running" (tests/threads_corpus's tokenize_pool).
                reason = None
        if reason is None:
            reason = _CALL_REASON.get(name)
        return callee, reason, line
