/* probe._fastspans: the span hot path (probe.spans) in C.

   probe.spans works without this module (its pure-Python path is the reference and the
   fallback): setup.py builds it where a C compiler is and installs without it where none
   is. It does what the pure path does, with the same objects, in the same order:

   - SpanCore: the base of probe.spans.Span (name, category, attrs, request_id) with
     __enter__/__exit__ and the NVTX attributes cache;
   - wrap_sync(fn, span): the callable @stage returns for a plain function. It forwards
     its arguments with vectorcall (no tuple or dict is built) and is a descriptor, as
     a function is, so a decorated method binds; its __dict__ takes functools.wraps'
     attributes, and it pickles by its qualified name as the function it replaces would;
   - configure(...): the process-wide switches the pure path reads as module globals
     (the recorder, span logging, the NVTX domain, the id counter), kept in step by
     probe.spans whenever one changes.

   The context value and the finished record are the pure path's tuples:
     context (span_id, request_id, parent_context, start_ns, owner)
     record  (span_id, parent_id, name, category, start_ns, end_ns, request_id, attrs)
   Clock: CLOCK_MONOTONIC, which is what time.perf_counter_ns reads on Linux; probe.spans
   checks the two agree at import and uses the pure path where they do not. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

/* ---- process-wide state ------------------------------------------------------------ */

static PyObject *g_recorder;   /* Py_None or the active SpanRecorder */
static int g_logging_on;
static PyObject *g_nvtx_dom;   /* NULL when no NVTX tool is attached */
static PyObject *g_nvtx_push;  /* g_nvtx_dom.push_range */
static PyObject *g_nvtx_pop;   /* g_nvtx_dom.pop_range */
static PyObject *g_ids;        /* the span id iterator (itertools.count) */
static PyObject *g_current;    /* the ContextVar of the innermost open span */
static PyObject *g_emit_log;   /* probe.spans._emit_log */
static PyObject *g_tls_key;    /* this module's key in each thread's state dict */
static PyObject *g_list_append;/* list.append, to tell plain buffers from overriding ones */
static PyObject *s_request, *s_local, *s_buf, *s_thread_buffer,
    *s_get_event_attributes, *s_message, *s_append, *s_qualname;

static inline int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
is_request_category(PyObject *category)
{
    if (category == s_request) return 1;
    if (category == NULL || !PyUnicode_Check(category)) return 0;
    return PyUnicode_Compare(category, s_request) == 0;
}

/* ---- recording a finished span ------------------------------------------------------ */

/* This thread's buffer of the active recorder (a new reference) and whether its append
   is list.append (a counting buffer overrides it). The pair is kept in the thread's
   state dict, keyed to the recorder it belongs to; the first span of a thread under a
   recorder takes the recorder's own slow path (rec.local.buf, else rec.thread_buffer()). */
static PyObject *
thread_buffer(PyObject *rec, int *plain)
{
    PyObject *tdict = PyThreadState_GetDict();
    if (tdict != NULL) {
        PyObject *entry = PyDict_GetItemWithError(tdict, g_tls_key);
        if (entry != NULL && PyTuple_GET_ITEM(entry, 0) == rec) {
            *plain = PyTuple_GET_ITEM(entry, 2) == Py_True;
            return Py_NewRef(PyTuple_GET_ITEM(entry, 1));
        }
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *buf = NULL;
    PyObject *local = PyObject_GetAttr(rec, s_local);
    if (local == NULL) return NULL;
    buf = PyObject_GetAttr(local, s_buf);
    Py_DECREF(local);
    if (buf == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
        buf = PyObject_CallMethodNoArgs(rec, s_thread_buffer);
        if (buf == NULL) return NULL;
    }
    PyObject *append = PyObject_GetAttr((PyObject *)Py_TYPE(buf), s_append);
    if (append == NULL) {
        Py_DECREF(buf);
        return NULL;
    }
    *plain = PyList_Check(buf) && append == g_list_append;
    Py_DECREF(append);
    if (tdict != NULL) {
        PyObject *entry = PyTuple_Pack(3, rec, buf, *plain ? Py_True : Py_False);
        if (entry == NULL || PyDict_SetItem(tdict, g_tls_key, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(buf);
            return NULL;
        }
        Py_DECREF(entry);
    }
    return buf;
}

/* Hand a finished record to the recorder and the span log, as probe.spans._finish. */
static int
finish(PyObject *record)
{
    PyObject *rec = g_recorder;
    if (rec != Py_None) {
        int plain = 0;
        Py_INCREF(rec);
        PyObject *buf = thread_buffer(rec, &plain);
        Py_DECREF(rec);
        if (buf == NULL) return -1;
        int rc;
        if (plain) {
            rc = PyList_Append(buf, record);
        }
        else {
            PyObject *r = PyObject_CallMethodOneArg(buf, s_append, record);
            rc = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_DECREF(buf);
        if (rc < 0) return -1;
    }
    if (g_logging_on && g_emit_log != NULL) {
        PyObject *r = PyObject_CallOneArg(g_emit_log, record);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *
make_record(PyObject *sid, PyObject *parent, PyObject *name, PyObject *category,
            PyObject *start, int64_t end_ns, PyObject *req, PyObject *attrs)
{
    PyObject *end = PyLong_FromLongLong(end_ns);
    if (end == NULL) return NULL;
    PyObject *record = PyTuple_New(8);
    if (record == NULL) {
        Py_DECREF(end);
        return NULL;
    }
    PyObject *parent_id = (parent != Py_None && PyTuple_Check(parent) && PyTuple_GET_SIZE(parent) > 0)
                              ? PyTuple_GET_ITEM(parent, 0)
                              : Py_None;
    PyTuple_SET_ITEM(record, 0, Py_NewRef(sid));
    PyTuple_SET_ITEM(record, 1, Py_NewRef(parent_id));
    PyTuple_SET_ITEM(record, 2, Py_NewRef(name ? name : Py_None));
    PyTuple_SET_ITEM(record, 3, Py_NewRef(category ? category : Py_None));
    PyTuple_SET_ITEM(record, 4, Py_NewRef(start));
    PyTuple_SET_ITEM(record, 5, end);
    PyTuple_SET_ITEM(record, 6, Py_NewRef(req));
    PyTuple_SET_ITEM(record, 7, Py_NewRef(attrs ? attrs : Py_None));
    /* Ids, names, times and None cannot form a cycle: the collector need not follow a
       record it would only untrack at its first pass (records wait up to a second to be
       drained, and each tracked one makes every young collection longer). */
    if (attrs == NULL || attrs == Py_None) PyObject_GC_UnTrack(record);
    return record;
}

/* The request id a new span carries: its own (a request span) or its parent's. */
static PyObject *
request_of(int is_request, PyObject *fixed, PyObject *parent, PyObject *sid)
{
    if (is_request) {
        if (fixed != NULL && fixed != Py_None) return Py_NewRef(fixed);
        return PyUnicode_FromFormat("r%S", sid);
    }
    if (parent != Py_None && PyTuple_Check(parent) && PyTuple_GET_SIZE(parent) > 1)
        return Py_NewRef(PyTuple_GET_ITEM(parent, 1));
    Py_RETURN_NONE;
}

/* ---- SpanCore ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *category;
    PyObject *attrs;
    PyObject *request_id;
    PyObject *nvtx_dom;   /* the domain nvtx_attrs was made for */
    PyObject *nvtx_attrs;
} SpanCore;

static int
core_traverse(SpanCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->name);
    Py_VISIT(self->category);
    Py_VISIT(self->attrs);
    Py_VISIT(self->request_id);
    Py_VISIT(self->nvtx_dom);
    Py_VISIT(self->nvtx_attrs);
    return 0;
}

static int
core_clear(SpanCore *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->category);
    Py_CLEAR(self->attrs);
    Py_CLEAR(self->request_id);
    Py_CLEAR(self->nvtx_dom);
    Py_CLEAR(self->nvtx_attrs);
    return 0;
}

static void
core_dealloc(SpanCore *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    core_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static int
core_init(SpanCore *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"name", "category", "attrs", "request_id", NULL};
    PyObject *name, *category, *attrs = Py_None, *request_id = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO", kwlist, &name, &category, &attrs,
                                     &request_id))
        return -1;
    int truthy = PyObject_IsTrue(attrs);
    if (truthy < 0) return -1;
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->category, Py_NewRef(category));
    Py_XSETREF(self->attrs, Py_NewRef(truthy ? attrs : Py_None));
    Py_XSETREF(self->request_id, Py_NewRef(request_id));
    Py_CLEAR(self->nvtx_dom);
    Py_CLEAR(self->nvtx_attrs);
    return 0;
}

/* The NVTX event attributes of this span's name for `dom`, made once per domain
   (borrowed reference; NULL with an error set). */
static PyObject *
core_nvtx_attrs_for(SpanCore *self, PyObject *dom)
{
    if (self->nvtx_dom != dom || self->nvtx_attrs == NULL) {
        PyObject *method = PyObject_GetAttr(dom, s_get_event_attributes);
        if (method == NULL) return NULL;
        PyObject *kwargs = PyDict_New();
        if (kwargs == NULL || PyDict_SetItem(kwargs, s_message,
                                             self->name ? self->name : Py_None) < 0) {
            Py_DECREF(method);
            Py_XDECREF(kwargs);
            return NULL;
        }
        PyObject *empty = PyTuple_New(0);
        PyObject *made = empty ? PyObject_Call(method, empty, kwargs) : NULL;
        Py_XDECREF(empty);
        Py_DECREF(method);
        Py_DECREF(kwargs);
        if (made == NULL) return NULL;
        Py_XSETREF(self->nvtx_attrs, made);
        Py_XSETREF(self->nvtx_dom, Py_NewRef(dom));
    }
    return self->nvtx_attrs;
}

static PyObject *
core_nvtx_attrs(SpanCore *self, PyObject *dom)
{
    PyObject *attrs = core_nvtx_attrs_for(self, dom);
    return attrs ? Py_NewRef(attrs) : NULL;
}

static int
nvtx_push(SpanCore *span)
{
    PyObject *dom = g_nvtx_dom;
    if (dom == NULL) return 0;
    PyObject *attrs = core_nvtx_attrs_for(span, dom);
    if (attrs == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(g_nvtx_push, attrs);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int
nvtx_pop(void)
{
    if (g_nvtx_dom == NULL) return 0;
    PyObject *r = PyObject_CallNoArgs(g_nvtx_pop);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *
core_enter(SpanCore *self, PyObject *Py_UNUSED(ignored))
{
    if (self->name == NULL || self->name == Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "probe.%S() used as a context manager needs a name",
                     self->category ? self->category : Py_None);
        return NULL;
    }
    if (nvtx_push(self) < 0) return NULL;
    if (g_recorder == Py_None && !g_logging_on) return Py_NewRef(self);
    PyObject *parent;
    if (PyContextVar_Get(g_current, NULL, &parent) < 0) return NULL;
    if (parent == NULL) parent = Py_NewRef(Py_None);
    PyObject *sid = PyIter_Next(g_ids);
    if (sid == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "span ids ran out");
        Py_DECREF(parent);
        return NULL;
    }
    PyObject *req = request_of(is_request_category(self->category), self->request_id, parent, sid);
    PyObject *start = req ? PyLong_FromLongLong(now_ns()) : NULL;
    PyObject *ctx = start ? PyTuple_Pack(5, sid, req, parent, start, (PyObject *)self) : NULL;
    Py_DECREF(sid);
    Py_XDECREF(req);
    Py_DECREF(parent);
    Py_XDECREF(start);
    if (ctx == NULL) return NULL;
    PyObject *token = PyContextVar_Set(g_current, ctx);
    Py_DECREF(ctx);
    if (token == NULL) return NULL;
    Py_DECREF(token);
    return Py_NewRef(self);
}

static PyObject *
core_exit(SpanCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t end = now_ns();
    PyObject *ctx;
    if (PyContextVar_Get(g_current, NULL, &ctx) < 0) return NULL;
    if (ctx != NULL && PyTuple_Check(ctx) && PyTuple_GET_SIZE(ctx) == 5 &&
        PyTuple_GET_ITEM(ctx, 4) == (PyObject *)self) {
        PyObject *parent = PyTuple_GET_ITEM(ctx, 2);
        PyObject *token = PyContextVar_Set(g_current, parent);
        if (token == NULL) {
            Py_DECREF(ctx);
            return NULL;
        }
        Py_DECREF(token);
        PyObject *record = make_record(PyTuple_GET_ITEM(ctx, 0), parent, self->name,
                                       self->category, PyTuple_GET_ITEM(ctx, 3), end,
                                       PyTuple_GET_ITEM(ctx, 1), self->attrs);
        int rc = record ? finish(record) : -1;
        Py_XDECREF(record);
        if (rc < 0) {
            if (nargs > 0 && args[0] != Py_None) {
                PyErr_Clear();  /* the with-block's own error wins, as above */
            }
            else {
                Py_DECREF(ctx);
                return NULL;
            }
        }
    }
    Py_XDECREF(ctx);
    if (nvtx_pop() < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef core_methods[] = {
    {"__enter__", (PyCFunction)core_enter, METH_NOARGS, "Open the span (a context manager)."},
    {"__exit__", (PyCFunction)(void (*)(void))core_exit, METH_FASTCALL,
     "Close the span and record it."},
    {"_nvtx_attrs", (PyCFunction)core_nvtx_attrs, METH_O,
     "The NVTX event attributes of this span's name for an NVTX domain (cached)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef core_members[] = {
    {"name", T_OBJECT, offsetof(SpanCore, name), 0, "The span's name."},
    {"category", T_OBJECT, offsetof(SpanCore, category), 0, "stage, span or request."},
    {"attrs", T_OBJECT, offsetof(SpanCore, attrs), 0, "Its attributes, or None."},
    {"request_id", T_OBJECT, offsetof(SpanCore, request_id), 0,
     "A request span's fixed id, or None."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot core_slots[] = {
    {Py_tp_doc, "The state-free core of probe.spans.Span: its fields and its with-block."},
    {Py_tp_init, core_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_methods, core_methods},
    {Py_tp_members, core_members},
    {0, NULL},
};

static PyType_Spec core_spec = {
    .name = "probe._fastspans.SpanCore",
    .basicsize = sizeof(SpanCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = core_slots,
};

static PyTypeObject *SpanCoreType;

/* ---- the decorator's wrapper ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *span;          /* the SpanCore: the context's owner and the NVTX cache */
    PyObject *name;
    PyObject *category;
    PyObject *attrs;
    PyObject *fixed_request; /* a request span's fixed id, or None */
    int is_request;
    PyObject *dict;
    PyObject *weakrefs;
    vectorcallfunc vectorcall;
} Wrapper;

static PyObject *
call_under_nvtx(Wrapper *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (nvtx_push((SpanCore *)self->span) < 0) return NULL;
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (nvtx_pop() < 0) {
        if (et != NULL) PyErr_Clear();  /* the call's own error wins (probe.spans) */
        else {
            Py_XDECREF(result);
            return NULL;
        }
    }
    PyErr_Restore(et, ev, tb);
    return result;
}

static PyObject *
wrapper_vectorcall(Wrapper *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (g_recorder == Py_None && !g_logging_on) {
        if (g_nvtx_dom == NULL) return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
        return call_under_nvtx(self, args, nargsf, kwnames);
    }
    PyObject *parent;
    if (PyContextVar_Get(g_current, NULL, &parent) < 0) return NULL;
    if (parent == NULL) parent = Py_NewRef(Py_None);
    PyObject *sid = PyIter_Next(g_ids);
    if (sid == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "span ids ran out");
        Py_DECREF(parent);
        return NULL;
    }
    PyObject *req = request_of(self->is_request, self->fixed_request, parent, sid);
    PyObject *start = NULL, *ctx = NULL, *token = NULL;
    if (req == NULL || nvtx_push((SpanCore *)self->span) < 0) goto fail;
    start = PyLong_FromLongLong(now_ns());
    if (start == NULL) goto fail_popped;
    ctx = PyTuple_Pack(5, sid, req, parent, start, self->span);
    if (ctx == NULL) goto fail_popped;
    token = PyContextVar_Set(g_current, ctx);
    Py_CLEAR(ctx);
    if (token == NULL) goto fail_popped;

    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    int64_t end = now_ns();
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int rc = PyContextVar_Reset(g_current, token);
    Py_DECREF(token);
    if (rc == 0) rc = nvtx_pop();
    PyObject *record = NULL;
    if (rc == 0) {
        record = make_record(sid, parent, self->name, self->category, start, end, req,
                             self->attrs);
        rc = record ? finish(record) : -1;
        Py_XDECREF(record);
    }
    Py_DECREF(sid);
    Py_DECREF(req);
    Py_DECREF(parent);
    Py_DECREF(start);
    if (rc < 0) {
        /* The call's own error is what its caller must see: a failure to record is
           dropped (a recorder that fails raises again on the next call that returns). */
        if (et != NULL) PyErr_Clear();
        else {
            Py_XDECREF(result);
            return NULL;
        }
    }
    PyErr_Restore(et, ev, tb);
    return result;

fail_popped:
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (nvtx_pop() < 0) PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
fail:
    Py_XDECREF(start);
    Py_XDECREF(req);
    Py_DECREF(sid);
    Py_DECREF(parent);
    return NULL;
}

static int
wrapper_traverse(Wrapper *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->fn);
    Py_VISIT(self->span);
    Py_VISIT(self->name);
    Py_VISIT(self->category);
    Py_VISIT(self->attrs);
    Py_VISIT(self->fixed_request);
    Py_VISIT(self->dict);
    return 0;
}

static int
wrapper_clear(Wrapper *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->span);
    Py_CLEAR(self->name);
    Py_CLEAR(self->category);
    Py_CLEAR(self->attrs);
    Py_CLEAR(self->fixed_request);
    Py_CLEAR(self->dict);
    return 0;
}

static void
wrapper_dealloc(Wrapper *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    wrapper_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* A function is a descriptor: looked up on an instance it binds to it. */
static PyObject *
wrapper_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
wrapper_repr(Wrapper *self)
{
    return PyUnicode_FromFormat("<probe %S %R wrapping %R>", self->category, self->name,
                                self->fn);
}

/* Pickled by reference, as the function it replaces: its qualified name. */
static PyObject *
wrapper_reduce(Wrapper *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_GetAttr((PyObject *)self, s_qualname);
}

static PyMethodDef wrapper_methods[] = {
    {"__reduce__", (PyCFunction)wrapper_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef wrapper_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Wrapper, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Wrapper, weakrefs), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Wrapper, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot wrapper_slots[] = {
    {Py_tp_doc, "A function timed as a probe span (made by @probe.stage and its kin)."},
    {Py_tp_dealloc, wrapper_dealloc},
    {Py_tp_traverse, wrapper_traverse},
    {Py_tp_clear, wrapper_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, wrapper_descr_get},
    {Py_tp_repr, wrapper_repr},
    {Py_tp_methods, wrapper_methods},
    {Py_tp_members, wrapper_members},
    {Py_tp_getset, wrapper_getset},
    {0, NULL},
};

static PyType_Spec wrapper_spec = {
    .name = "probe._fastspans.SpanWrapper",
    .basicsize = sizeof(Wrapper),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = wrapper_slots,
};

static PyTypeObject *WrapperType;

static PyObject *
wrap_sync(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wrap_sync(fn, span)");
        return NULL;
    }
    PyObject *fn = args[0], *span = args[1];
    if (!PyObject_TypeCheck(span, SpanCoreType)) {
        PyErr_SetString(PyExc_TypeError, "wrap_sync: span must be a SpanCore");
        return NULL;
    }
    SpanCore *core = (SpanCore *)span;
    Wrapper *self = PyObject_GC_New(Wrapper, WrapperType);
    if (self == NULL) return NULL;
    self->fn = Py_NewRef(fn);
    self->span = Py_NewRef(span);
    self->name = Py_NewRef(core->name ? core->name : Py_None);
    self->category = Py_NewRef(core->category ? core->category : Py_None);
    self->attrs = Py_NewRef(core->attrs ? core->attrs : Py_None);
    self->fixed_request = Py_NewRef(core->request_id ? core->request_id : Py_None);
    self->is_request = is_request_category(core->category);
    self->dict = NULL;
    self->weakrefs = NULL;
    self->vectorcall = (vectorcallfunc)wrapper_vectorcall;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}


/* ---- probe.span / probe.stage themselves ------------------------------------------------ */

/* `with probe.span("x"):` calls the factory once a block: a Python function there cost
   ~150 ns of a ~550-ns block (its frame and the dict its **attrs makes on every call).
   This callable answers the common form, one exact str and nothing else, from the
   factory's dict of spans made by name; every other form (a decorator's function,
   keywords, attrs, a name not kept yet) goes to the Python factory, which fills the
   dict. */

typedef struct {
    PyObject_HEAD
    PyObject *named;     /* the Python factory's dict: name -> the span kept for it */
    PyObject *fallback;  /* the Python factory */
    PyObject *dict;      /* __name__, __doc__, __wrapped__... */
    vectorcallfunc vectorcall;
} Factory;

static PyObject *
factory_vectorcall(Factory *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL && PyUnicode_CheckExact(args[0])) {
        PyObject *span = PyDict_GetItemWithError(self->named, args[0]);
        if (span != NULL) return Py_NewRef(span);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
factory_traverse(Factory *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->named);
    Py_VISIT(self->fallback);
    Py_VISIT(self->dict);
    return 0;
}

static int
factory_clear(Factory *self)
{
    Py_CLEAR(self->named);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->dict);
    return 0;
}

static void
factory_dealloc(Factory *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    factory_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *
factory_repr(Factory *self)
{
    PyObject *name = self->dict ? PyDict_GetItemString(self->dict, "__name__") : NULL;
    return PyUnicode_FromFormat("<function probe.%S>", name ? name : Py_None);
}

static PyMemberDef factory_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Factory, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Factory, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef factory_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot factory_slots[] = {
    {Py_tp_doc, "probe.span / probe.stage (its __doc__ says which), compiled."},
    {Py_tp_dealloc, factory_dealloc},
    {Py_tp_traverse, factory_traverse},
    {Py_tp_clear, factory_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, factory_repr},
    {Py_tp_members, factory_members},
    {Py_tp_getset, factory_getset},
    {0, NULL},
};

static PyType_Spec factory_spec = {
    .name = "probe._fastspans.SpanFactory",
    .basicsize = sizeof(Factory),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = factory_slots,
};

static PyTypeObject *FactoryType;

static PyObject *
span_factory(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "span_factory(named: dict, fallback: callable)");
        return NULL;
    }
    Factory *self = PyObject_GC_New(Factory, FactoryType);
    if (self == NULL) return NULL;
    self->named = Py_NewRef(args[0]);
    self->fallback = Py_NewRef(args[1]);
    self->dict = NULL;
    self->vectorcall = (vectorcallfunc)factory_vectorcall;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* ---- the spans journal's encoding ---------------------------------------------------- */

/* What the collector writes once a second per thread: json.JSONEncoder(separators=(",",
   ":"), default=str).encode([[tid], records]) byte for byte (ASCII escapes, as json's
   ensure_ascii), for the records the hot path makes. A record's attrs (a dict, or
   anything else) is handed to `encode` (that encoder) and spliced in. A value of a
   type not expected in a record (a float where an id goes...) makes it return None:
   the caller then encodes the batch the plain way. */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

static int
out_reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more) cap *= 2;
    char *grown = PyMem_Realloc(o->buf, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = grown;
    o->cap = cap;
    return 0;
}

static int
out_bytes(Out *o, const char *data, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->buf + o->len, data, n);
    o->len += n;
    return 0;
}

static int
out_char(Out *o, char c)
{
    return out_bytes(o, &c, 1);
}

/* 1: written; 0: not an exact int in 64 bits (the caller falls back); -1: error */
static int
out_int(Out *o, PyObject *v)
{
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return 0;
    if (n == -1 && PyErr_Occurred()) return -1;
    char digits[24];
    int i = sizeof digits;
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (n < 0) digits[--i] = '-';
    return out_bytes(o, digits + i, (Py_ssize_t)sizeof digits - i) < 0 ? -1 : 1;
}

static const char HEX[] = "0123456789abcdef";

static int
out_escaped_unit(Out *o, Py_UCS4 c)
{
    char esc[6] = {'\\', 'u', HEX[(c >> 12) & 15], HEX[(c >> 8) & 15], HEX[(c >> 4) & 15],
                   HEX[c & 15]};
    return out_bytes(o, esc, 6);
}

/* a character json's ensure_ascii writes as it is: printable ASCII but a quote or a
   backslash */
static inline int
json_plain(Py_UCS4 c)
{
    return c >= ' ' && c <= '~' && c != '\\' && c != '"';
}

/* one character json's ensure_ascii escapes: a quote, a backslash, a control character,
   or one past ASCII (as UTF-16 units: a surrogate pair past the BMP); 0 or -1 */
static int
out_escaped(Out *o, Py_UCS4 c)
{
    switch (c) {
    case '\\': return out_bytes(o, "\\\\", 2);
    case '"': return out_bytes(o, "\\\"", 2);
    case '\b': return out_bytes(o, "\\b", 2);
    case '\f': return out_bytes(o, "\\f", 2);
    case '\n': return out_bytes(o, "\\n", 2);
    case '\r': return out_bytes(o, "\\r", 2);
    case '\t': return out_bytes(o, "\\t", 2);
    }
    if (c >= 0x10000) {
        Py_UCS4 v = c - 0x10000;
        if (out_escaped_unit(o, 0xd800 | ((v >> 10) & 0x3ff)) < 0) return -1;
        return out_escaped_unit(o, 0xdc00 | (v & 0x3ff));
    }
    return out_escaped_unit(o, c);
}

/* 1 / 0 / -1 as out_int: a str as json's encode_basestring_ascii writes it */
static int
out_str(Out *o, PyObject *v)
{
    if (!PyUnicode_CheckExact(v)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    if (out_reserve(o, n + 2) < 0 || out_char(o, '"') < 0) return -1;
    if (PyUnicode_IS_ASCII(v)) {  /* runs of unescaped characters copied at once */
        const char *ascii = (const char *)PyUnicode_DATA(v);
        Py_ssize_t run = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (json_plain((unsigned char)ascii[i])) continue;
            if (out_bytes(o, ascii + run, i - run) < 0) return -1;
            if (out_escaped(o, (unsigned char)ascii[i]) < 0) return -1;
            run = i + 1;
        }
        if (out_bytes(o, ascii + run, n - run) < 0) return -1;
        return out_char(o, '"') < 0 ? -1 : 1;
    }
    int kind = PyUnicode_KIND(v);
    const void *data = PyUnicode_DATA(v);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if ((json_plain(c) ? out_char(o, (char)c) : out_escaped(o, c)) < 0) return -1;
    }
    return out_char(o, '"') < 0 ? -1 : 1;
}

/* an int, a str or None: 1 / 0 / -1 */
static int
out_atom(Out *o, PyObject *v, int str_allowed)
{
    if (v == Py_None) return out_bytes(o, "null", 4) < 0 ? -1 : 1;
    if (str_allowed && PyUnicode_CheckExact(v)) return out_str(o, v);
    return out_int(o, v);
}

/* A dict of str keys whose values are None, a bool, an int in 64 bits or a str, as json
   writes it (a served request's attrs: ~5 us a record through the encoder, the
   collector's largest cost on a busy server). 1: written; 0: something else, nothing
   written (the caller hands it to the encoder); -1: error. Nothing here runs Python
   code, so the dict cannot change under the walk. */
static int
out_flat_dict(Out *o, PyObject *d)
{
    if (!PyDict_CheckExact(d)) return 0;
    Py_ssize_t mark = o->len, pos = 0;
    PyObject *key, *value;
    if (out_char(o, '{') < 0) return -1;
    for (int first = 1; PyDict_Next(d, &pos, &key, &value); first = 0) {
        if (!PyUnicode_CheckExact(key)) goto other;
        if ((!first && out_char(o, ',') < 0) || out_str(o, key) < 0 || out_char(o, ':') < 0)
            return -1;
        int rc;
        if (value == Py_True) rc = out_bytes(o, "true", 4) < 0 ? -1 : 1;
        else if (value == Py_False) rc = out_bytes(o, "false", 5) < 0 ? -1 : 1;
        else rc = out_atom(o, value, 1);
        if (rc < 0) return -1;
        if (rc == 0) goto other;
    }
    return out_char(o, '}') < 0 ? -1 : 1;
other:
    o->len = mark;  /* undo the part written: the encoder writes the whole dict */
    return 0;
}

static int
out_record(Out *o, PyObject *record, PyObject *encode)
{
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 8) return 0;
    /* (span_id, parent_id, name, category, start_ns, end_ns, request_id, attrs) */
    static const char strings[7] = {0, 0, 1, 1, 0, 0, 1};
    if (out_char(o, '[') < 0) return -1;
    for (int i = 0; i < 7; i++) {
        if (i && out_char(o, ',') < 0) return -1;
        int rc = out_atom(o, PyTuple_GET_ITEM(record, i), strings[i]);
        if (rc <= 0) return rc;
    }
    if (out_char(o, ',') < 0) return -1;
    PyObject *attrs = PyTuple_GET_ITEM(record, 7);
    if (attrs == Py_None) {
        if (out_bytes(o, "null", 4) < 0) return -1;
    }
    else {
        int flat = out_flat_dict(o, attrs);
        if (flat < 0) return -1;
        if (!flat) {  /* not a flat dict: json's encoder writes it */
            PyObject *text = PyObject_CallOneArg(encode, attrs);
            if (text == NULL) return -1;
            Py_ssize_t n;
            const char *utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &n) : NULL;
            int rc = utf8 == NULL ? -1 : out_bytes(o, utf8, n);
            Py_DECREF(text);
            if (rc < 0) return -1;
        }
    }
    return out_char(o, ']') < 0 ? -1 : 1;
}

static PyObject *
encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(tid, records, encode)");
        return NULL;
    }
    PyObject *tid = args[0], *records = args[1], *encode = args[2];
    if (!PyList_Check(records)) Py_RETURN_NONE;
    Out o = {NULL, 0, 0};
    int rc = out_bytes(&o, "[[", 2);
    if (rc == 0) rc = out_int(&o, tid) == 1 ? 0 : 1;
    if (rc == 0) rc = out_bytes(&o, "],[", 3);
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(records); i++) {
        if (i && out_char(&o, ',') < 0) {
            rc = -1;
            break;
        }
        PyObject *record = Py_NewRef(PyList_GET_ITEM(records, i));  /* attrs run user code */
        int done = out_record(&o, record, encode);
        Py_DECREF(record);
        rc = done == 1 ? 0 : (done == 0 ? 1 : -1);
    }
    if (rc == 0) rc = out_bytes(&o, "]]", 2);
    PyObject *result = NULL;
    if (rc == 0) result = PyUnicode_DecodeASCII(o.buf, o.len, NULL);
    else if (rc == 1 && !PyErr_Occurred()) result = Py_NewRef(Py_None);
    PyMem_Free(o.buf);
    return result;
}

/* ---- configuration and the clock --------------------------------------------------- */

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"recorder", "logging_on", "nvtx", "ids", "current", "emit_log",
                             NULL};
    PyObject *recorder, *nvtx, *ids, *current, *emit_log;
    int logging_on;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "$OpOOOO", kwlist, &recorder, &logging_on,
                                     &nvtx, &ids, &current, &emit_log))
        return NULL;
    if (!PyContextVar_CheckExact(current)) {
        PyErr_SetString(PyExc_TypeError, "configure: current must be a ContextVar");
        return NULL;
    }
    if (!PyIter_Check(ids)) {
        PyErr_SetString(PyExc_TypeError, "configure: ids must be an iterator");
        return NULL;
    }
    PyObject *push = NULL, *pop = NULL;
    if (nvtx != Py_None) {
        push = PyObject_GetAttrString(nvtx, "push_range");
        pop = push ? PyObject_GetAttrString(nvtx, "pop_range") : NULL;
        if (pop == NULL) {
            Py_XDECREF(push);
            return NULL;
        }
    }
    Py_XSETREF(g_recorder, Py_NewRef(recorder));
    g_logging_on = logging_on;
    Py_XSETREF(g_nvtx_dom, nvtx == Py_None ? NULL : Py_NewRef(nvtx));
    Py_XSETREF(g_nvtx_push, push);
    Py_XSETREF(g_nvtx_pop, pop);
    Py_XSETREF(g_ids, Py_NewRef(ids));
    Py_XSETREF(g_current, Py_NewRef(current));
    Py_XSETREF(g_emit_log, Py_NewRef(emit_log));
    Py_RETURN_NONE;
}

static PyObject *
clock_ns(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef module_methods[] = {
    {"wrap_sync", (PyCFunction)(void (*)(void))wrap_sync, METH_FASTCALL,
     "wrap_sync(fn, span): fn timed as `span` on every call."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, recorder, logging_on, nvtx, ids, current, emit_log): the switches."},
    {"clock_ns", clock_ns, METH_NOARGS, "The clock spans are timed with, in ns."},
    {"span_factory", (PyCFunction)(void (*)(void))span_factory, METH_FASTCALL,
     "span_factory(named, fallback): probe.span's callable, answering one str from "
     "`named`, every other call from `fallback`."},
    {"encode_batch", (PyCFunction)(void (*)(void))encode_batch, METH_FASTCALL,
     "encode_batch(tid, records, encode): one thread's spans as the journal's JSON line, "
     "or None where a record holds what it does not encode."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "probe._fastspans",
    .m_doc = "The span hot path of probe.spans, compiled.",
    .m_size = -1,
    .m_methods = module_methods,
};

static int
intern_all(void)
{
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_request, "request");
    INTERN(s_local, "local");
    INTERN(s_buf, "buf");
    INTERN(s_thread_buffer, "thread_buffer");
    INTERN(s_get_event_attributes, "get_event_attributes");
    INTERN(s_message, "message");
    INTERN(s_append, "append");
    INTERN(s_qualname, "__qualname__");
#undef INTERN
    g_tls_key = PyUnicode_FromString("probe._fastspans.thread_buffer");
    g_list_append = PyObject_GetAttrString((PyObject *)&PyList_Type, "append");
    g_recorder = Py_NewRef(Py_None);
    return g_tls_key && g_list_append ? 0 : -1;
}

PyMODINIT_FUNC
PyInit__fastspans(void)
{
    if (g_tls_key == NULL && intern_all() < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    SpanCoreType = (PyTypeObject *)PyType_FromSpec(&core_spec);
    WrapperType = (PyTypeObject *)PyType_FromSpec(&wrapper_spec);
    FactoryType = (PyTypeObject *)PyType_FromSpec(&factory_spec);
    if (SpanCoreType == NULL || WrapperType == NULL || FactoryType == NULL ||
        PyModule_AddObjectRef(m, "SpanCore", (PyObject *)SpanCoreType) < 0 ||
        PyModule_AddObjectRef(m, "SpanWrapper", (PyObject *)WrapperType) < 0 ||
        PyModule_AddObjectRef(m, "SpanFactory", (PyObject *)FactoryType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
