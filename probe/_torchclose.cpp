/* probe._torchclose: close a torch.profiler window without holding the GIL.

   torch's Python binding of the profiler's stop (torch.autograd._disable_profiler) and of
   the result's save hold the GIL while torch builds the window's events and writes its
   Kineto trace: ~20 us an event, 0.3-0.4 s for a 0.1-s window of
   tests/torch_corpus/decoder.py, during which every Python thread of the target stops
   (probe.samplers.torch_windows). Neither step touches a Python object when the window
   records no Python stacks (probe's windows do not), so this module calls the same C++
   functions -- torch::autograd::profiler::disableProfiler(), ProfilerResult::save(path)
   and the result's destructor -- with the GIL released: the target's threads run on
   while probe's own thread does the work.

   No torch header is needed, nor torch at build time: the three functions are looked up
   by their mangled names in the libtorch_cpu already loaded (dlopen RTLD_NOLOAD), and
   declared here by types whose calling convention is theirs:
     disableProfiler()  returns std::unique_ptr<ProfilerResult>, a class with one pointer
                        and a non-trivial destructor: returned through a hidden pointer,
                        as Holder below is;
     save(this, path)   a non-virtual member: `this` first, then const std::string&
                        (the C++11 ABI's string: the mangled name says __cxx11, and a
                        torch built with the old ABI has no such symbol: not resolved);
     ~ProfilerResult()  non-virtual (libtorch has no deleting destructor for it), so
                        `delete` is the complete-object destructor, then operator delete.
   Whatever torch throws (c10::Error derives from std::exception) is caught here and
   raised as RuntimeError: a C++ exception must never unwind through the interpreter.
   Where a symbol is missing, resolve() says which and probe uses torch's Python binding. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

#include <cstddef>
#include <exception>
#include <new>
#include <string>

namespace {

struct Opaque;

/* The return convention of std::unique_ptr<ProfilerResult>: one pointer, non-trivially
   destructible (hence returned in memory the caller provides). Its destructor does
   nothing: the result is destroyed explicitly, through torch's own destructor. */
struct Holder {
    Opaque *result = nullptr;
    Holder() = default;
    Holder(const Holder &) = delete;
    ~Holder() {}
};

using DisableFn = Holder (*)();
using SaveFn = void (*)(Opaque *, const std::string &);
using DestroyFn = void (*)(Opaque *);

const char *const kDisable = "_ZN5torch8autograd8profiler15disableProfilerEv";
const char *const kSave =
    "_ZN5torch8autograd8profiler14ProfilerResult4saveERKNSt7__cxx1112basic_stringIcSt11"
    "char_traitsIcESaIcEEE";
const char *const kDestroy = "_ZN5torch8autograd8profiler14ProfilerResultD1Ev";

DisableFn g_disable = nullptr;
SaveFn g_save = nullptr;
DestroyFn g_destroy = nullptr;

/* what went wrong, its first line (c10::Error's message goes on with a C++ backtrace),
   into `error` (empty: nothing did); no allocation, so nothing here can throw */
void say(char *error, size_t size, const char *what) {
    size_t n = 0;
    while (what[n] != '\0' && what[n] != '\n' && n + 1 < size) {
        error[n] = what[n];
        ++n;
    }
    error[n] = '\0';
}

/* One window closed: the profiler stopped, its trace written to `path`, the result
   freed. Runs without the GIL; every exception is caught here. */
void close_window(const std::string &path, char *error, size_t size) noexcept {
    Opaque *result = nullptr;
    error[0] = '\0';
    try {
        Holder held = g_disable();
        result = held.result;
        if (result == nullptr) return say(error, size, "torch's profiler returned no result");
        g_save(result, path);
    } catch (const std::exception &e) {
        say(error, size, e.what()[0] ? e.what() : "torch's profiler raised an exception");
    } catch (...) {
        say(error, size, "torch's profiler raised an exception that is not a std::exception");
    }
    if (result != nullptr) {
        try {
            g_destroy(result);
            ::operator delete(static_cast<void *>(result));
        } catch (...) {
            if (error[0] == '\0') say(error, size, "freeing the profiler's result failed");
        }
    }
}

PyObject *py_resolve(PyObject *, PyObject *args) {
    const char *library;
    if (!PyArg_ParseTuple(args, "s", &library)) return nullptr;
    void *handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return PyUnicode_FromFormat("%s is not loaded", library);
    const char *names[] = {kDisable, kSave, kDestroy};
    void *found[3];
    for (int i = 0; i < 3; ++i) {
        found[i] = dlsym(handle, names[i]);
        if (found[i] == nullptr) {
            dlclose(handle);
            return PyUnicode_FromFormat("%s has no %s", library, names[i]);
        }
    }
    /* the handle stays open: the functions must outlive this call */
    g_disable = reinterpret_cast<DisableFn>(found[0]);
    g_save = reinterpret_cast<SaveFn>(found[1]);
    g_destroy = reinterpret_cast<DestroyFn>(found[2]);
    return PyUnicode_FromString("");
}

PyObject *py_close_window(PyObject *, PyObject *args) {
    const char *path;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "s#", &path, &length)) return nullptr;
    if (g_disable == nullptr || g_save == nullptr || g_destroy == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "torch's profiler functions are not resolved");
        return nullptr;
    }
    char error[512];
    try {
        std::string where(path, static_cast<size_t>(length));
        Py_BEGIN_ALLOW_THREADS
        close_window(where, error, sizeof error);
        Py_END_ALLOW_THREADS
    } catch (const std::bad_alloc &) {  /* the path's copy, made with the GIL held */
        return PyErr_NoMemory();
    }
    if (error[0] != '\0') {
        PyErr_SetString(PyExc_RuntimeError, error);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"resolve", py_resolve, METH_VARARGS,
     "resolve(library) -> str: find torch's profiler functions in the loaded library; "
     "'' when found, else which is missing."},
    {"close_window", py_close_window, METH_VARARGS,
     "close_window(path) -> None: stop torch's profiler and write its Kineto trace to "
     "path, with the GIL released; RuntimeError with torch's message when it fails."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "probe._torchclose",
    "Close a torch.profiler window without holding the GIL (see the source's header).", -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__torchclose(void) { return PyModule_Create(&module); }
