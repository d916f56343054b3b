/* Where CPython keeps a thread's frames (see probe/_tickpeek.c): offsets read from the
 * interpreter's own internal header, in a unit of their own so that Py_BUILD_CORE changes
 * nothing else. Only the layout probe is tested on (3.11) is used; on any other version
 * PEEK_SUPPORTED is 0 and the sampler reads frames with the GIL, as before. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
const int PEEK_SUPPORTED = 1;

/* The interpreter's threads as they are now, newest first (CPython links a new thread
 * state at the head), at most ``most``: their states' addresses, idents and kernel TIDs
 * (0 for a thread not yet running). Called without the GIL: the list is walked under the
 * runtime's lock on it (pystate.c's HEAD_LOCK), which every insertion and removal takes,
 * and a state is freed only once it is off the list. */
int peek_thread_list(PyInterpreterState *interp, uintptr_t *states, unsigned long *idents,
                     long *tids, int most) {
    int n = 0;
    PyThread_acquire_lock(_PyRuntime.interpreters.mutex, WAIT_LOCK);
    for (PyThreadState *t = interp->threads.head; t != NULL && n < most; t = t->next) {
        states[n] = (uintptr_t)t;
        idents[n] = t->thread_id;
        tids[n] = (long)t->native_thread_id;
        n++;
    }
    PyThread_release_lock(_PyRuntime.interpreters.mutex);
    return n;
}
const size_t PEEK_TS_CFRAME = offsetof(PyThreadState, cframe);
const size_t PEEK_CF_CURRENT = offsetof(_PyCFrame, current_frame);
const size_t PEEK_FR_CODE = offsetof(_PyInterpreterFrame, f_code);
const size_t PEEK_FR_PREVIOUS = offsetof(_PyInterpreterFrame, previous);
const size_t PEEK_FR_INSTR = offsetof(_PyInterpreterFrame, prev_instr);
const size_t PEEK_CO_CODE = offsetof(PyCodeObject, co_code_adaptive);
const size_t PEEK_TS_CHUNK = offsetof(PyThreadState, datastack_chunk);
const size_t PEEK_TS_TOP = offsetof(PyThreadState, datastack_top);
const size_t PEEK_CHUNK_SIZE = offsetof(_PyStackChunk, size);
const size_t PEEK_CHUNK_DATA = offsetof(_PyStackChunk, data);
#else
const int PEEK_SUPPORTED = 0;
int peek_thread_list(PyInterpreterState *interp, uintptr_t *states, unsigned long *idents,
                     long *tids, int most) {
    return 0;
}
const size_t PEEK_TS_CFRAME = 0, PEEK_CF_CURRENT = 0, PEEK_FR_CODE = 0, PEEK_FR_PREVIOUS = 0,
             PEEK_FR_INSTR = 0, PEEK_CO_CODE = 0, PEEK_TS_CHUNK = 0, PEEK_TS_TOP = 0, PEEK_CHUNK_SIZE = 0,
             PEEK_CHUNK_DATA = 0;
#endif
