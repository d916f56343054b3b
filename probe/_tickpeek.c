/* The stack sampler's view of a thread at the tick's instant (probe.samplers.peek).
 *
 * A sampler thread must hold the GIL to read frames, and it gets the GIL where the
 * thread that holds it lets go: at the next GIL-releasing call (a numpy product, a
 * socket read) within the switch interval. Frames read then charge the Python and
 * GIL-holding C code that ran before that call to the call (batch_scorer's `parse`, 8% of
 * its run by in-process timers, read as 0%; its `score` 88-93% against 72%). So the
 * sampler waits for its tick here, with the GIL released, and at the tick reads each
 * wanted thread's frame chain -- the code object and instruction of each frame -- before
 * it asks for the GIL.
 *
 * Those reads race the threads they read. Every one goes through process_vm_readv on
 * this very process: memory that is no longer mapped fails the read instead of faulting.
 * A chain read mid-call can be torn; the addresses are only numbers until
 * probe.samplers.peek checks them with the GIL held (code_at: a live code object there,
 * by its type and a plausible reference count -- no object is freed while the GIL is
 * held), and a chain that does not check out is not used. */
#define _GNU_SOURCE
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

extern const int PEEK_SUPPORTED;
extern int peek_thread_list(PyInterpreterState *interp, uintptr_t *states, unsigned long *idents,
                            long *tids, int most);
extern const size_t PEEK_TS_CFRAME, PEEK_CF_CURRENT, PEEK_FR_CODE, PEEK_FR_PREVIOUS,
    PEEK_FR_INSTR, PEEK_CO_CODE, PEEK_TS_CHUNK, PEEK_TS_TOP, PEEK_CHUNK_SIZE, PEEK_CHUNK_DATA;

#define MAX_THREADS 64
#define MAX_DEPTH 256
#define MAX_CALLS 32
#define KERNEL_TEXT 320

static size_t frame_lo, frame_span; /* the frame's bytes that hold the three fields */

/* getpid() at each read: a forked child must read its own memory, not its parent's */
static int read_bytes(void *dst, uintptr_t src, size_t n) {
    struct iovec local = {dst, n}, remote = {(void *)src, n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int read_word(uintptr_t src, uintptr_t *out) { return read_bytes(out, src, sizeof *out); }

/* The thread runs on while it is read: a frame popped meanwhile keeps its bytes until a
 * later call reuses them, so a chain read one frame at a time (a system call each, a
 * microsecond or more) from a leaf that has since returned goes on through frames that
 * now belong to other calls -- the json frames of feature_digest's `encode` on top of
 * the next record's `tokenize`: tokenize read 41% of its loop against 34%, encode 12%
 * against 18% (retrying a walk whose leaf moved was worse: it keeps the stretches that
 * hold still, tokenize 65%). So the frames are read as one snapshot: the thread's
 * current stack chunk, where CPython keeps its frames, in one call right after the leaf
 * is read; only frames outside it (a generator's, an older chunk's) are read one by
 * one. */
#define SNAPSHOT_MAX (256 * 1024)
#define SNAPSHOT_MARGIN 2048

struct snapshot {
    uintptr_t lo;
    size_t len;
    unsigned char *bytes;
};

static int read_frame(const struct snapshot *snap, uintptr_t frame, unsigned char *block) {
    uintptr_t at = frame + frame_lo;
    if (snap->len && at >= snap->lo && at + frame_span <= snap->lo + snap->len) {
        memcpy(block, snap->bytes + (at - snap->lo), frame_span);
        return 0;
    }
    return read_bytes(block, at, frame_span);
}

/* the thread's current stack chunk, from its start to the top of its frames as they
 * were read (and a margin for a call made since), at most SNAPSHOT_MAX */
static void take_snapshot(uintptr_t chunk, size_t size, uintptr_t top, struct snapshot *snap) {
    snap->len = 0;
    if (!chunk || size <= PEEK_CHUNK_DATA || top < chunk + PEEK_CHUNK_DATA) return;
    size_t len = top - (chunk + PEEK_CHUNK_DATA) + SNAPSHOT_MARGIN;
    if (len > size - PEEK_CHUNK_DATA) len = size - PEEK_CHUNK_DATA;
    if (len > SNAPSHOT_MAX) len = SNAPSHOT_MAX;
    snap->lo = chunk + PEEK_CHUNK_DATA;
    /* sized to the frames (a few KB to tens: the heap, not an mmap and munmap a tick) */
    snap->bytes = malloc(len);
    if (snap->bytes != NULL && read_bytes(snap->bytes, snap->lo, len) == 0) snap->len = len;
}

static int walk_snapshot(struct snapshot *snap, uintptr_t frame, uintptr_t *slots, int max_depth) {
    unsigned char block[128];
    int n = 0;
    while (frame && n < max_depth) {
        if (read_frame(snap, frame, block)) return -1;
        uintptr_t code, instr, previous;
        memcpy(&code, block + (PEEK_FR_CODE - frame_lo), sizeof code);
        memcpy(&instr, block + (PEEK_FR_INSTR - frame_lo), sizeof instr);
        memcpy(&previous, block + (PEEK_FR_PREVIOUS - frame_lo), sizeof previous);
        slots[3 * n] = frame;
        slots[3 * n + 1] = code;
        slots[3 * n + 2] = instr;
        n++;
        frame = previous;
    }
    return n;
}

/* A thread's frames, leaf first: (frame, code, instruction) a frame; -1 where a read
 * failed. */
static int walk(uintptr_t tstate, uintptr_t *slots, int max_depth) {
    uintptr_t cframe, frame, chunk, top, size = 0;
    struct snapshot snap = {0, 0, NULL};
    if (read_word(tstate + PEEK_TS_CFRAME, &cframe) || !cframe) return -1;
    if (read_word(tstate + PEEK_TS_CHUNK, &chunk) || (chunk && read_word(chunk + PEEK_CHUNK_SIZE, &size)))
        return -1;
    if (read_word(tstate + PEEK_TS_TOP, &top) || read_word(cframe + PEEK_CF_CURRENT, &frame))
        return -1;
    take_snapshot(chunk, size, top, &snap);
    int n = walk_snapshot(&snap, frame, slots, max_depth);
    free(snap.bytes);
    return n;
}

static PyObject *thread_states(PyObject *module, PyObject *unused) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
        PyObject *key = PyLong_FromUnsignedLong(t->thread_id);
        PyObject *value = Py_BuildValue("(Nk)", PyLong_FromVoidPtr(t), t->native_thread_id);
        int failed = key == NULL || value == NULL || PyDict_SetItem(out, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (failed) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *chains(uintptr_t *slots, int *depths, Py_ssize_t count, int max_depth) {
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *chain;
        if (depths[i] < 0) {
            chain = Py_NewRef(Py_None);
        } else {
            chain = PyTuple_New(3 * depths[i]);
            for (int j = 0; chain != NULL && j < 3 * depths[i]; j++) {
                PyObject *v = PyLong_FromVoidPtr((void *)slots[i * 3 * max_depth + j]);
                if (v == NULL) Py_CLEAR(chain);
                else PyTuple_SET_ITEM(chain, j, v);
            }
            if (chain == NULL) {
                Py_DECREF(out);
                return NULL;
            }
        }
        PyList_SET_ITEM(out, i, chain);
    }
    return out;
}

/* A thread's CPU time (ns) by its kernel TID, -1 where it cannot be read (the thread has
 * exited). Linux's per-thread CPU clock id: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
static long long thread_cpu_ns(long tid) {
    struct timespec cpu;
    if (tid <= 0 || clock_gettime((clockid_t)((~(clockid_t)tid << 3) | 6), &cpu)) return -1;
    return (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec;
}

static PyObject *cpu_list(long long *cpus, Py_ssize_t count) {
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *v = PyLong_FromLongLong(cpus[i]);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* The kernel's state of a thread, read at the tick beside its frames: the text of its
 * /proc/self/task/TID/syscall, and with it the text of its stat (the call is -1: in the
 * kernel outside any call) or the link of the descriptor its call waits on (a call in
 * the caller's list of calls on one); probe.samplers.kernel parses both. */
struct kernel_read {
    char call[KERNEL_TEXT];
    char extra[KERNEL_TEXT];
    int has_call, has_extra;
};

static int read_text(const char *path, char *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, out, KERNEL_TEXT - 1);
    close(fd);
    if (n < 0) return -1;
    out[n] = 0;
    return 0;
}

static void read_kernel(long tid, const long *on_descriptor, int n_descriptor,
                        struct kernel_read *k) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
    k->has_call = read_text(path, k->call) == 0;
    if (!k->has_call || strncmp(k->call, "running", 7) == 0) return;
    char *end;
    long call = strtol(k->call, &end, 10);
    if (end == k->call) return;
    if (call == -1) {
        snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
        k->has_extra = read_text(path, k->extra) == 0;
        return;
    }
    for (int c = 0; c < n_descriptor; c++) {
        if (on_descriptor[c] != call) continue;
        unsigned long long fd = strtoull(end, NULL, 16);
        snprintf(path, sizeof path, "/proc/self/fd/%llu", fd);
        ssize_t n = readlink(path, k->extra, KERNEL_TEXT - 1);
        if (n >= 0) {
            k->extra[n] = 0;
            k->has_extra = 1;
        }
        return;
    }
}

/* A thread's time on a run queue so far (ns): the second field of its schedstat; -1 where
 * it cannot be read (the thread has exited, or the kernel keeps no such statistics). */
static long long run_queue_ns(long tid) {
    char path[64], text[KERNEL_TEXT];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    if (read_text(path, text)) return -1;
    char *end;
    strtoull(text, &end, 10);
    if (end == text) return -1;
    char *field = end;
    unsigned long long queued = strtoull(field, &end, 10);
    return end == field ? -1 : (long long)queued;
}

static PyObject *kernel_list(struct kernel_read *reads, const int *asked, Py_ssize_t count) {
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *v;
        if (!asked[i] || !reads[i].has_call)
            v = Py_NewRef(Py_None);
        else if (reads[i].has_extra)
            v = Py_BuildValue("(ss)", reads[i].call, reads[i].extra);
        else
            v = Py_BuildValue("(sO)", reads[i].call, Py_None);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

struct kernel_ask {
    double busy;          /* a thread on a CPU this share of its interval is not asked */
    long on_descriptor[MAX_CALLS];
    int n_descriptor, max_reads;
};

/* kernel: None, or (busy share, (calls on a descriptor, ...), reads at most a tick) */
static int parse_kernel(PyObject *kernel, struct kernel_ask *ask) {
    ask->max_reads = 0;
    if (kernel == Py_None) return 0;
    PyObject *calls;
    if (!PyArg_ParseTuple(kernel, "dO!i", &ask->busy, &PyTuple_Type, &calls, &ask->max_reads))
        return -1;
    ask->n_descriptor = (int)(PyTuple_GET_SIZE(calls) < MAX_CALLS ? PyTuple_GET_SIZE(calls) : MAX_CALLS);
    for (int c = 0; c < ask->n_descriptor; c++) {
        ask->on_descriptor[c] = PyLong_AsLong(PyTuple_GET_ITEM(calls, c));
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

/* born: None, or (known thread states' addresses, idents to skip, at most how many) */
struct born_ask {
    uintptr_t known[MAX_THREADS * 4];
    unsigned long skip[MAX_THREADS];
    Py_ssize_t n_known, n_skip;
    int most;
};

static int parse_born(PyObject *args, struct born_ask *born) {
    born->n_known = born->n_skip = 0;
    born->most = 0;
    if (args == Py_None) return 0;
    PyObject *known, *skip;
    if (!PyArg_ParseTuple(args, "O!O!i", &PyTuple_Type, &known, &PyTuple_Type, &skip, &born->most))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(known);
    if (n > MAX_THREADS * 4) {
        born->most = 0;  /* too many known to tell a new one from: none read as born */
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        born->known[i] = (uintptr_t)PyLong_AsVoidPtr(PyTuple_GET_ITEM(known, i));
        if (PyErr_Occurred()) return -1;
    }
    born->n_known = n;
    n = PyTuple_GET_SIZE(skip);
    if (n > MAX_THREADS) n = MAX_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        born->skip[i] = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(skip, i));
        if (PyErr_Occurred()) return -1;
    }
    born->n_skip = n;
    return 0;
}

/* The threads the caller did not know of when it asked (born since its list), newest
 * first, at most ``most``, each not in ``known`` (thread states' addresses) nor in
 * ``skip`` (idents), nor yet running: appended to the arrays from ``count`` on; the
 * new count. Without the GIL (peek_thread_list). */
static Py_ssize_t add_born(PyInterpreterState *interp, const struct born_ask *born,
                           uintptr_t *addrs, long *tids, unsigned long *idents,
                           long long *last_ns, long long *last_cpu, Py_ssize_t count) {
    uintptr_t states[MAX_THREADS];
    unsigned long ids[MAX_THREADS];
    long kernel_tids[MAX_THREADS];
    int listed = peek_thread_list(interp, states, ids, kernel_tids, MAX_THREADS);
    Py_ssize_t added = 0;
    for (int i = 0; i < listed && added < born->most && count < MAX_THREADS; i++) {
        int skip = kernel_tids[i] <= 0;
        for (Py_ssize_t k = 0; !skip && k < born->n_known; k++) skip = born->known[k] == states[i];
        for (Py_ssize_t k = 0; !skip && k < born->n_skip; k++) skip = born->skip[k] == ids[i];
        if (skip) continue;
        addrs[count] = states[i];
        tids[count] = kernel_tids[i];
        idents[count] = ids[i];
        last_ns[count] = last_cpu[count] = -1;
        count++;
        added++;
    }
    return count;
}

static PyObject *wait_and_peek(PyObject *module, PyObject *args) {
    int fd, max_depth;
    double timeout_s;
    PyObject *threads, *kernel, *born_args = Py_None;
    if (!PyArg_ParseTuple(args, "idO!iO|O", &fd, &timeout_s, &PyList_Type, &threads, &max_depth,
                          &kernel, &born_args))
        return NULL;
    struct kernel_ask ask;
    if (parse_kernel(kernel, &ask) < 0) return NULL;
    struct born_ask born;
    if (parse_born(born_args, &born) < 0) return NULL;
    PyInterpreterState *interp = PyInterpreterState_Get();
    Py_ssize_t count = PyList_GET_SIZE(threads);
    if (count > MAX_THREADS) count = MAX_THREADS;
    Py_ssize_t asked_for = count;
    if (max_depth < 1) max_depth = 1;
    if (max_depth > MAX_DEPTH) max_depth = MAX_DEPTH;
    uintptr_t addrs[MAX_THREADS];
    long tids[MAX_THREADS];
    unsigned long idents[MAX_THREADS];
    long long cpus[MAX_THREADS], last_ns[MAX_THREADS], last_cpu[MAX_THREADS];
    long long queued[MAX_THREADS];
    int depths[MAX_THREADS], asked[MAX_THREADS] = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *state;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(threads, i), "OlLL", &state, &tids[i], &last_ns[i],
                              &last_cpu[i]))
            return NULL;
        addrs[i] = (uintptr_t)PyLong_AsVoidPtr(state);
        if (PyErr_Occurred()) return NULL;
    }
    /* room for the threads born since the list was made (born.most of them) */
    uintptr_t *slots = malloc(sizeof(uintptr_t) * 3 * max_depth * MAX_THREADS);
    struct kernel_read *reads = calloc(MAX_THREADS, sizeof *reads);
    if (slots == NULL || reads == NULL) {
        free(slots);
        free(reads);
        return PyErr_NoMemory();
    }
    int woken = 0;
    long long now = 0;
    struct timespec at;
    Py_BEGIN_ALLOW_THREADS
    struct pollfd p = {fd, POLLIN, 0};
    double t = timeout_s > 0 ? timeout_s : 0;
    struct timespec wait = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    int ready;
    do {
        ready = ppoll(&p, 1, &wait, NULL);
    } while (ready < 0 && errno == EINTR);
    woken = ready > 0;
    if (!woken && born.most > 0)
        count = add_born(interp, &born, addrs, tids, idents, last_ns, last_cpu, count);
    clock_gettime(CLOCK_MONOTONIC, &at);
    now = (long long)at.tv_sec * 1000000000LL + at.tv_nsec;
    int kernel_reads = 0;
    for (Py_ssize_t i = 0; !woken && i < count; i++) {
        /* the CPU clock, the frames and (for a thread that ran, but not throughout) the
         * kernel's state at one instant: the row's interval ends where its stack was
         * read, whatever later the GIL comes */
        cpus[i] = thread_cpu_ns(tids[i]);
        /* its wait for a CPU so far, where it ran since its last sample (one that did not
         * run has had no wait credited since: the kernel adds one as the thread runs) */
        queued[i] = cpus[i] >= 0 && cpus[i] != last_cpu[i] ? run_queue_ns(tids[i]) : -1;
        depths[i] = walk(addrs[i], slots + i * 3 * max_depth, max_depth);
        long long ran = cpus[i] - last_cpu[i], wall = now - last_ns[i];
        if (kernel_reads < ask.max_reads && cpus[i] >= 0 && last_cpu[i] >= 0 && last_ns[i] >= 0 &&
            ran > 0 && wall > 0 && (double)ran < ask.busy * (double)wall) {
            asked[i] = 1;
            kernel_reads++;
            read_kernel(tids[i], ask.on_descriptor, ask.n_descriptor, &reads[i]);
        }
    }
    Py_END_ALLOW_THREADS
    if (woken) {
        free(slots);
        free(reads);
        Py_RETURN_NONE;
    }
    PyObject *read = chains(slots, depths, count, max_depth);
    free(slots);
    PyObject *cpu = read ? cpu_list(cpus, count) : NULL;
    PyObject *states = cpu ? kernel_list(reads, asked, count) : NULL;
    free(reads);
    PyObject *waits = states ? cpu_list(queued, count) : NULL;
    PyObject *new_threads = waits ? PyList_New(count - asked_for) : NULL;
    for (Py_ssize_t i = asked_for; new_threads != NULL && i < count; i++) {
        PyObject *pair = Py_BuildValue("(kl)", idents[i], tids[i]);
        if (pair == NULL) Py_CLEAR(new_threads);
        else PyList_SET_ITEM(new_threads, i - asked_for, pair);
    }
    if (new_threads == NULL) {
        Py_XDECREF(read);
        Py_XDECREF(cpu);
        Py_XDECREF(states);
        Py_XDECREF(waits);
        return NULL;
    }
    return Py_BuildValue("(LNNNNN)", now, read, cpu, states, new_threads, waits);
}

static PyObject *code_at(PyObject *module, PyObject *arg) {
    uintptr_t addr = (uintptr_t)PyLong_AsVoidPtr(arg);
    if (PyErr_Occurred()) return NULL;
    uintptr_t refcnt, type;
    if (addr == 0 || addr % sizeof(void *) ||
        read_word(addr + offsetof(PyObject, ob_refcnt), &refcnt) ||
        read_word(addr + offsetof(PyObject, ob_type), &type))
        Py_RETURN_NONE;
    /* A freed block's first words hold the allocator's links (pymalloc's next-free
     * pointer where the count was; glibc's key or back link where the type was). */
    if (type != (uintptr_t)&PyCode_Type || refcnt == 0 || refcnt > ((uintptr_t)1 << 32))
        Py_RETURN_NONE;
    return Py_NewRef((PyObject *)addr);
}

static PyMethodDef methods[] = {
    {"thread_states", thread_states, METH_NOARGS,
     "thread_states() -> {thread ident: (address of its thread state, its kernel TID)}"},
    {"wait_and_peek", wait_and_peek, METH_VARARGS,
     "wait_and_peek(fd, timeout_s, threads, max_depth, kernel, born=None) -> None when fd "
     "became readable, else (CLOCK_MONOTONIC ns of the reads, [per thread: (frame, code, "
     "instruction, ...) leaf first, or None where a read failed], [per thread: its CPU "
     "time in ns, or -1], [per thread: (syscall text, stat text or descriptor link or "
     "None), or None where not read], [(ident, TID) of each thread read past those "
     "asked: born since], [per thread: its time on a run queue so far in ns (schedstat), "
     "-1 where unread: it did not run since its last sample]). threads: [(thread state address, TID, last instant ns, last "
     "CPU ns; -1 unknown)]; kernel: None, or (busy share, (calls on a descriptor, ...), "
     "kernel reads at most); born: None, or ((the thread states known, ...), (idents "
     "not to read, ...), at most how many): the threads the interpreter has at the tick "
     "that are neither are read too, newest first"},
    {"code_at", code_at, METH_O, "code_at(address) -> the live code object there, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "probe._tickpeek", NULL, -1, methods,
};

static int reads_work(void) {
    uintptr_t probe_value = 0x5eed, out = 0;
    return read_word((uintptr_t)&probe_value, &out) == 0 && out == probe_value;
}

PyMODINIT_FUNC PyInit__tickpeek(void) {
    size_t lo = PEEK_FR_CODE, hi = PEEK_FR_CODE;
    size_t fields[] = {PEEK_FR_PREVIOUS, PEEK_FR_INSTR};
    for (int i = 0; i < 2; i++) {
        if (fields[i] < lo) lo = fields[i];
        if (fields[i] > hi) hi = fields[i];
    }
    frame_lo = lo;
    frame_span = hi - lo + sizeof(uintptr_t);
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    /* a seccomp filter may refuse process_vm_readv (some containers): then no peeking */
    int usable = PEEK_SUPPORTED && frame_span <= 128 && reads_work();
    if (PyModule_AddIntConstant(m, "USABLE", usable) < 0 ||
        PyModule_AddIntConstant(m, "CODE_OFFSET", (long)PEEK_CO_CODE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
