/* Where CPython keeps a thread's frames (see probe/_tickpeek.c): offsets read from the
 * interpreter's own internal header, in a unit of their own so that Py_BUILD_CORE changes
 * nothing else. Only the layout probe is tested on (3.11) is used; on any other version
 * PEEK_SUPPORTED is 0 and the sampler reads frames with the GIL, as before. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include "internal/pycore_frame.h"
const int PEEK_SUPPORTED = 1;
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
const size_t PEEK_TS_CFRAME = 0, PEEK_CF_CURRENT = 0, PEEK_FR_CODE = 0, PEEK_FR_PREVIOUS = 0,
             PEEK_FR_INSTR = 0, PEEK_CO_CODE = 0, PEEK_TS_CHUNK = 0, PEEK_TS_TOP = 0, PEEK_CHUNK_SIZE = 0,
             PEEK_CHUNK_DATA = 0;
#endif
