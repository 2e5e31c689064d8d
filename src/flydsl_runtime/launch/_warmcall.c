/* flydsl_runtime.launch._warmcall: the warm path of a plain launcher call, in C.
 *
 * Contract (the Python side is flydsl_runtime/launch/jit.py, which owns every other path):
 *
 *   WarmCall: the base type of jit.Launcher. Its instances carry, as writable members, the
 *   launcher state the warm path reads: _owners (dict: owner class or None -> _OwnerState),
 *   _entries (dict: key -> Entry), _tails (dict: number of positional arguments -> the
 *   defaults completing them), _signer (argsig.ArgSigner), _jf (the FlyDSL JitFunction)
 *   and the hit counter _hits.
 *
 *   configure(env_memo, env_version, context_type, hints_tls, device_cell)
 *       Once, from launch/jit.py: the two-item list [environment version, CallEnv] (replaced as a
 *       pair, under the GIL), the environment's version reader, ir.Context (its "current"
 *       is None outside a trace), FlyDSL's thread-local compile-hint overlay and a
 *       one-item list holding the device-id reader (None until bound).
 *
 *   __call__(*args, **kwargs)
 *       Exactly the tests of jit.Launcher._py_call (the specification, which runs when this
 *       extension is not built), in its order: no keywords; an owner-None state; a tail
 *       for len(args); the memo's version equal to the environment's version now; not
 *       inside a trace; the state's guard passes; CallEnv's debug_info and verify false;
 *       no persistent compile hints; the signer's warm plan (ArgSigner._warm: the argument
 *       types it was made for, each argument's kind and payload: 0 a constant token, 1 a
 *       raw tensor signed through the (dtype, stride()) memo, 2 a compile-time scalar
 *       keyed (type, value)) matches the argument types exactly; the device reader is
 *       bound, or COMPILE_ONLY is set (the device is then None: jit._device). The key
 *       (digest, argument key form, env token, device id or None, (), None) must
 *       find an entry that is launchable (or COMPILE_ONLY), has no extra guards, with no
 *       hint overlay set, and whose env reads still hold. Then: _hits += 1 and either
 *       None (COMPILE_ONLY) or entry.compiled(*positional).
 *       Anything else, and any Exception raised while deciding, goes to self._py_call(*args,
 *       **kwargs) (the Python warm path, which falls back to the general path): it decides
 *       the call from the start, so nothing here is counted or changed before that. A
 *       BaseException that is not an Exception (KeyboardInterrupt) propagates. The launch
 *       itself (entry.compiled(...)) is not part of the decision: what it raises propagates.
 *
 *   Reentrancy: the guard check, the version reader, Context.current, tensor attributes,
 *   the device reader, key hashing and env_reads.holds() run Python code that may replace
 *   any member, clear a dict or drop the state. Every object used after such a call is
 *   held by a strong reference taken before it; nothing borrowed survives a call out (the
 *   configured objects too: configure() may run inside such a call). Every member and
 *   configured object is checked for the type its items are read as (exact dicts, a tuple
 *   tail, the memo and device cell lists of two and one items, the warm plan's tuples of
 *   the argument count) before an item is read; anything else goes to the Python path.
 */
#include "cext.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *owners;
    PyObject *entries;
    PyObject *tails;
    PyObject *signer;
    PyObject *jf;
    Py_ssize_t hits;
    /* the owner-None state last seen, with its guard's check and its digest */
    PyObject *seen_state;
    PyObject *seen_check;
    PyObject *seen_digest;
} WarmCall;

static PyObject *env_memo, *env_version, *context_type, *hints_tls, *device_cell;
static PyObject *s_current, *s_data, *s_compiled, *s_extra_guards, *s_env_reads, *s_holds;
static PyObject *s_compile_hints, *s_warm, *s_dtype, *s_stride, *s_py_call, *s_guard, *s_check;
static PyObject *s_digest, *empty_tuple;

/* 1 true, 0 false, -1 error; consumes obj */
static int
truth_steal(PyObject *obj)
{
    if (obj == NULL) {
        return -1;
    }
    int t = PyObject_IsTrue(obj);
    Py_DECREF(obj);
    return t;
}

/* The owner-None state's guard check and digest (new references), refreshed when the
 * state object is not the one seen last. 0 ok, -1 error. */
static int
state_parts(WarmCall *self, PyObject *state, PyObject **check, PyObject **digest)
{
    if (state != self->seen_state) {
        PyObject *guard = PyObject_GetAttr(state, s_guard);
        if (guard == NULL) {
            return -1;
        }
        PyObject *new_check = PyObject_GetAttr(guard, s_check);
        Py_DECREF(guard);
        if (new_check == NULL) {
            return -1;
        }
        PyObject *new_digest = PyObject_GetAttr(state, s_digest);
        if (new_digest == NULL) {
            Py_DECREF(new_check);
            return -1;
        }
        PyObject *old_state = self->seen_state, *old_check = self->seen_check, *old_digest = self->seen_digest;
        Py_INCREF(state);
        self->seen_state = state;
        self->seen_check = new_check;
        self->seen_digest = new_digest;
        Py_XDECREF(old_state);
        Py_XDECREF(old_check);
        Py_XDECREF(old_digest);
    }
    *check = Py_NewRef(self->seen_check);
    *digest = Py_NewRef(self->seen_digest);
    return 0;
}

/* The argument key form under the signer's warm plan: a new tuple, NULL with no exception
 * when the plan does not apply, NULL with an exception on error. */
static PyObject *
argument_key(PyObject *signer, PyObject *positional)
{
    PyObject *warm = NULL, *key = NULL;
    if (cext_optional_attr(signer, s_warm, &warm) < 0) {
        return NULL;
    }
    if (warm == NULL || !PyTuple_CheckExact(warm) || PyTuple_GET_SIZE(warm) != 3) {
        Py_XDECREF(warm);
        return NULL;
    }
    PyObject *types = PyTuple_GET_ITEM(warm, 0), *kinds = PyTuple_GET_ITEM(warm, 1);
    PyObject *payloads = PyTuple_GET_ITEM(warm, 2);
    Py_ssize_t n = PyTuple_GET_SIZE(positional);
    if (!PyTuple_CheckExact(types) || !PyTuple_CheckExact(kinds) || !PyTuple_CheckExact(payloads) ||
        PyTuple_GET_SIZE(types) != n || PyTuple_GET_SIZE(kinds) != n || PyTuple_GET_SIZE(payloads) != n) {
        goto not_applicable;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(positional, i)) != PyTuple_GET_ITEM(types, i)) {
            goto not_applicable;
        }
    }
    key = PyTuple_New(n);
    if (key == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arg = PyTuple_GET_ITEM(positional, i), *payload = PyTuple_GET_ITEM(payloads, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        PyObject *item = NULL;
        if (kind == 0) {
            item = Py_NewRef(payload);
        }
        else if (kind == 1) {
            if (!PyDict_CheckExact(payload)) {
                goto not_applicable;
            }
            PyObject *dtype = PyObject_GetAttr(arg, s_dtype);
            if (dtype == NULL) {
                goto error;
            }
            PyObject *stride = PyObject_CallMethodNoArgs(arg, s_stride);
            if (stride == NULL) {
                Py_DECREF(dtype);
                goto error;
            }
            PyObject *pair = PyTuple_Pack(2, dtype, stride);
            Py_DECREF(dtype);
            Py_DECREF(stride);
            if (pair == NULL) {
                goto error;
            }
            item = PyDict_GetItemWithError(payload, pair); /* borrowed */
            Py_XINCREF(item);
            Py_DECREF(pair);
            if (item == NULL) {
                if (PyErr_Occurred()) {
                    goto error;
                }
                goto not_applicable; /* a signature not in the memo yet: the Python path adds it */
            }
        }
        else if (kind == 2) {
            item = PyTuple_Pack(2, payload, arg);
            if (item == NULL) {
                goto error;
            }
        }
        else {
            if (kind == -1 && PyErr_Occurred()) {
                goto error;
            }
            goto not_applicable;
        }
        PyTuple_SET_ITEM(key, i, item);
    }
    Py_DECREF(warm);
    return key;
not_applicable:
    Py_XDECREF(key);
    Py_DECREF(warm);
    return NULL;
error:
    Py_XDECREF(key);
    Py_DECREF(warm);
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "flydsl_runtime.launch._warmcall: error without an exception");
    }
    return NULL;
}

static PyObject *
fallback(WarmCall *self, PyObject *args, PyObject *kwargs)
{
    PyObject *method = PyObject_GetAttr((PyObject *)self, s_py_call);
    if (method == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Call(method, args, kwargs);
    Py_DECREF(method);
    return result;
}

static PyObject *
warm_call(WarmCall *self, PyObject *args, PyObject *kwargs)
{
    PyObject *state = NULL, *tail = NULL, *version = NULL, *memo_version = NULL, *call_env = NULL;
    PyObject *check = NULL, *digest = NULL, *positional = NULL, *argkey = NULL, *device = NULL;
    PyObject *key = NULL, *entry = NULL, *compiled = NULL, *result = NULL, *signer = NULL;
    PyObject *entries = NULL, *reader = NULL;
    int t;

    if (env_memo == NULL || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        goto slow;
    }
    if (self->owners == NULL || !PyDict_CheckExact(self->owners) || self->tails == NULL ||
        !PyDict_CheckExact(self->tails) || self->entries == NULL || !PyDict_CheckExact(self->entries) ||
        self->signer == NULL || self->jf == NULL) {
        goto slow;
    }
    state = PyDict_GetItemWithError(self->owners, Py_None);
    if (state == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto slow;
    }
    Py_INCREF(state);
    {
        PyObject *n = PyLong_FromSsize_t(PyTuple_GET_SIZE(args));
        if (n == NULL) {
            goto error;
        }
        tail = PyDict_GetItemWithError(self->tails, n); /* keys are exact ints: no user code */
        Py_DECREF(n);
        if (tail == NULL) {
            if (PyErr_Occurred()) {
                goto error;
            }
            goto slow;
        }
        if (!PyTuple_Check(tail)) { /* a member Python code may set: read only as a tuple */
            tail = NULL;
            goto slow;
        }
        Py_INCREF(tail);
    }
    /* the same objects for the whole decision, whatever the Python code called below rebinds */
    signer = Py_NewRef(self->signer);
    entries = Py_NewRef(self->entries);
    {
        /* configure() may run inside the call and drop the module's reference */
        PyObject *reader_fn = Py_NewRef(env_version);
        version = PyObject_CallNoArgs(reader_fn);
        Py_DECREF(reader_fn);
    }
    if (version == NULL) {
        goto error;
    }
    if (!PyList_CheckExact(env_memo) || PyList_GET_SIZE(env_memo) != 2) {
        goto slow;
    }
    memo_version = Py_NewRef(PyList_GET_ITEM(env_memo, 0));
    call_env = Py_NewRef(PyList_GET_ITEM(env_memo, 1));
    t = PyObject_RichCompareBool(memo_version, version, Py_EQ);
    if (t < 0) {
        goto error;
    }
    if (!t || !PyTuple_Check(call_env) || PyTuple_GET_SIZE(call_env) != 6) {
        goto slow;
    }
    {
        PyObject *context = Py_NewRef(context_type); /* as env_version: held across the lookup */
        PyObject *current = PyObject_GetAttr(context, s_current);
        Py_DECREF(context);
        if (current == NULL) {
            goto error;
        }
        int outside = current == Py_None;
        Py_DECREF(current);
        if (!outside) {
            goto slow;
        }
    }
    if (state_parts(self, state, &check, &digest) < 0) {
        goto error;
    }
    t = truth_steal(PyObject_CallNoArgs(check));
    if (t < 0) {
        goto error;
    }
    /* CallEnv fields: target, env, compile_only, verify, debug_info, token */
    if (!t || PyTuple_GET_ITEM(call_env, 4) != Py_False || PyTuple_GET_ITEM(call_env, 3) != Py_False) {
        goto slow;
    }
    t = truth_steal(PyObject_GetAttr(self->jf, s_compile_hints));
    if (t < 0) {
        goto error;
    }
    if (t) {
        goto slow;
    }
    positional = PyTuple_GET_SIZE(tail) ? PySequence_Concat(args, tail) : Py_NewRef(args);
    if (positional == NULL) {
        goto error;
    }
    argkey = argument_key(signer, positional);
    if (argkey == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto slow;
    }
    if (!PyList_CheckExact(device_cell) || PyList_GET_SIZE(device_cell) != 1) {
        goto slow;
    }
    if (PyList_GET_ITEM(device_cell, 0) != Py_None) {
        reader = Py_NewRef(PyList_GET_ITEM(device_cell, 0));
        device = PyObject_CallNoArgs(reader);
        if (device == NULL) {
            goto error;
        }
    }
    else if (PyTuple_GET_ITEM(call_env, 2) == Py_True) {
        device = Py_NewRef(Py_None); /* COMPILE_ONLY before any launch: jit._device */
    }
    else {
        goto slow;
    }
    key = PyTuple_Pack(6, digest, argkey, PyTuple_GET_ITEM(call_env, 5), device, empty_tuple, Py_None);
    if (key == NULL) {
        goto error;
    }
    entry = PyDict_GetItemWithError(entries, key);
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto slow;
    }
    Py_INCREF(entry);
    compiled = PyObject_GetAttr(entry, s_compiled);
    if (compiled == NULL) {
        goto error;
    }
    {
        PyObject *flag = PyTuple_GET_ITEM(call_env, 2);
        if (flag != Py_True && flag != Py_False) {
            goto slow;
        }
        int compile_only = flag == Py_True;
        if (compiled == Py_None && !compile_only) {
            goto slow;
        }
        t = truth_steal(PyObject_GetAttr(entry, s_extra_guards));
        if (t < 0) {
            goto error;
        }
        if (t) {
            goto slow;
        }
        PyObject *overlay = NULL, *tls = Py_NewRef(hints_tls);
        int found = cext_optional_attr(tls, s_data, &overlay);
        Py_DECREF(tls);
        if (found < 0) {
            goto error;
        }
        int no_overlay = overlay == NULL || overlay == Py_None;
        Py_XDECREF(overlay);
        if (!no_overlay) {
            goto slow;
        }
        PyObject *reads = PyObject_GetAttr(entry, s_env_reads);
        if (reads == NULL) {
            goto error;
        }
        t = truth_steal(PyObject_CallMethodNoArgs(reads, s_holds));
        Py_DECREF(reads);
        if (t < 0) {
            goto error;
        }
        if (!t) {
            goto slow;
        }
        self->hits++;
        result = compile_only ? Py_NewRef(Py_None) : PyObject_Call(compiled, positional, NULL);
    }
    goto done;

error:
    /* A failure while deciding: the Python path decides again and raises what it raises.
     * KeyboardInterrupt, SystemExit and other non-Exception errors propagate at once. */
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        result = NULL;
        goto done;
    }
    PyErr_Clear();
slow:
    result = fallback(self, args, kwargs);
done:
    Py_XDECREF(state);
    Py_XDECREF(tail);
    Py_XDECREF(signer);
    Py_XDECREF(entries);
    Py_XDECREF(version);
    Py_XDECREF(memo_version);
    Py_XDECREF(call_env);
    Py_XDECREF(check);
    Py_XDECREF(digest);
    Py_XDECREF(positional);
    Py_XDECREF(argkey);
    Py_XDECREF(reader);
    Py_XDECREF(device);
    Py_XDECREF(key);
    Py_XDECREF(entry);
    Py_XDECREF(compiled);
    return result;
}

static const Py_ssize_t warm_fields[] = {
    CEXT_FIELD(WarmCall, owners),     CEXT_FIELD(WarmCall, entries),    CEXT_FIELD(WarmCall, tails),
    CEXT_FIELD(WarmCall, signer),     CEXT_FIELD(WarmCall, jf),         CEXT_FIELD(WarmCall, seen_state),
    CEXT_FIELD(WarmCall, seen_check), CEXT_FIELD(WarmCall, seen_digest), CEXT_FIELDS_END,
};

static int
warm_traverse(WarmCall *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return cext_visit_fields((PyObject *)self, warm_fields, visit, arg);
}

static int
warm_clear(WarmCall *self)
{
    cext_clear_fields((PyObject *)self, warm_fields);
    return 0;
}

static void
warm_dealloc(WarmCall *self)
{
    cext_gc_dealloc((PyObject *)self, (inquiry)warm_clear, NULL);
}

static PyMemberDef warm_members[] = {
    {"_owners", T_OBJECT_EX, offsetof(WarmCall, owners), 0, "owner class or None -> dependency state"},
    {"_entries", T_OBJECT_EX, offsetof(WarmCall, entries), 0, "key -> Entry"},
    {"_tails", T_OBJECT_EX, offsetof(WarmCall, tails), 0, "positional count -> completing defaults"},
    {"_signer", T_OBJECT_EX, offsetof(WarmCall, signer), 0, "the argument signer"},
    {"_jf", T_OBJECT_EX, offsetof(WarmCall, jf), 0, "the FlyDSL JitFunction"},
    {"_hits", T_PYSSIZET, offsetof(WarmCall, hits), 0, "hits"},
    {NULL},
};

static PyTypeObject WarmCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flydsl_runtime.launch._warmcall.WarmCall",
    .tp_basicsize = sizeof(WarmCall),
    .tp_dealloc = (destructor)warm_dealloc,
    .tp_call = (ternaryfunc)warm_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Base of flydsl_runtime.launch.jit.Launcher: the warm path of a plain call (module docstring).",
    .tp_traverse = (traverseproc)warm_traverse,
    .tp_clear = (inquiry)warm_clear,
    .tp_members = warm_members,
    .tp_new = PyType_GenericNew,
};

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *memo, *version, *context, *tls, *cell;
    if (!PyArg_ParseTuple(args, "O!OOOO!:configure", &PyList_Type, &memo, &version, &context, &tls, &PyList_Type,
                          &cell)) {
        return NULL;
    }
    if (!PyCallable_Check(version)) {
        PyErr_SetString(PyExc_TypeError, "configure(): env_version must be callable");
        return NULL;
    }
    Py_XSETREF(env_memo, Py_NewRef(memo));
    Py_XSETREF(env_version, Py_NewRef(version));
    Py_XSETREF(context_type, Py_NewRef(context));
    Py_XSETREF(hints_tls, Py_NewRef(tls));
    Py_XSETREF(device_cell, Py_NewRef(cell));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(env_memo: list, env_version, context_type, hints_tls, device_cell: list): once, from launch/jit.py"},
    {NULL},
};

static int
prepare(void)
{
    static const CextName names[] = {
        {&s_current, "current"},       {&s_data, "data"},          {&s_compiled, "compiled"},
        {&s_extra_guards, "extra_guards"}, {&s_env_reads, "env_reads"}, {&s_holds, "holds"},
        {&s_compile_hints, "compile_hints"}, {&s_warm, "_warm"},   {&s_dtype, "dtype"},
        {&s_stride, "stride"},         {&s_py_call, "_py_call"},   {&s_guard, "guard"},
        {&s_check, "check"},           {&s_digest, "digest"},
    };
    if (CEXT_INTERN_ALL(names) < 0) {
        return -1;
    }
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL) {
        return -1;
    }
    return PyType_Ready(&WarmCallType);
}

static int
fill(PyObject *module)
{
    return cext_add_type(module, "WarmCall", &WarmCallType);
}

CEXT_MODULE(_warmcall, "flydsl_runtime.launch._warmcall",
            "The warm path of a plain flydsl_runtime launcher call, in C (see the source's contract).", module_methods,
            prepare, fill)
