/* flydeps.watch._watchext: CPython >= 3.12 dict/type/function watchers behind one counter.
 *
 * Contract (the Python side is flydeps/watch/watchers.py, which documents the public API):
 *   version()          -> int   process-wide modification counter; unchanged means nothing
 *                               watched was modified since the caller last read it.
 *   watch_dict(d)              later set/del/clear/pop/update/clone of d bumps the counter.
 *   watch_type(t)              later attribute set/delete on t (through its dict watcher) or a
 *                               type modification (bases/MRO change) bumps the counter.
 *   watch_function(f)          later change of f.__code__/__defaults__/__kwdefaults__ bumps it.
 *   _set_broken()              from now on every version() call returns a new value (used when
 *                               a watcher slot could not be had: callers then always re-check).
 *   _info()                    dict of watcher ids and bookkeeping sizes (tests, logging).
 *   _C_API                     capsule "flydeps.watch._watchext._C_API" holding a FlydepsWatchAPI
 *                               {abi = 1, version}: version() from C without a Python call
 *                               (flydeps/builds/_fastcache.c reads it on every cached_factory hit).
 *
 * Watchers are registered lazily, once per process, on the first watch_* call of each kind.
 * Callbacks never call into the C-API (so a pending exception on entry is left untouched),
 * never touch the object beyond its address (dying objects are never resurrected) and always
 * return 0. Function watchers are process-global in CPython: the callback returns at once for
 * creation events and when no function is watched, and otherwise does one pointer-set probe.
 * Watched functions are kept by address only, removed on their DESTROY event, so a freed
 * function leaves nothing dangling. Watched dicts need no bookkeeping: CPython keeps the
 * watcher bit inside the dict and resets it when the memory is reused.
 */
#include "cext.h"
#include "capi.h"

#include <stdint.h>

#if PY_VERSION_HEX < 0x030C0000
#error "flydeps.watch._watchext needs CPython >= 3.12 (watcher C-API)"
#endif

static unsigned long long counter = 0;
static int broken = 0;
static int rearm_pending = 0;
static int dict_wid = -1;
static int type_wid = -1;
static int func_wid = -1;

/* ---- pointer set (open addressing, linear probing, tombstones) for watched functions ---- */
#define TOMB ((void *)1)
static void **fset = NULL;
static size_t fcap = 0;   /* power of two, 0 when unallocated */
static size_t fcount = 0; /* live entries */
static size_t fused = 0;  /* live entries + tombstones */

static inline size_t
ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int
fset_contains(const void *p)
{
    if (fcap == 0) {
        return 0;
    }
    size_t mask = fcap - 1;
    for (size_t i = ptr_hash(p) & mask;; i = (i + 1) & mask) {
        void *e = fset[i];
        if (e == p) {
            return 1;
        }
        if (e == NULL) {
            return 0;
        }
    }
}

static void
fset_remove(const void *p)
{
    if (fcap == 0) {
        return;
    }
    size_t mask = fcap - 1;
    for (size_t i = ptr_hash(p) & mask;; i = (i + 1) & mask) {
        void *e = fset[i];
        if (e == p) {
            fset[i] = TOMB;
            fcount--;
            return;
        }
        if (e == NULL) {
            return;
        }
    }
}

static void
fset_insert_raw(void **tab, size_t cap, void *p)
{
    size_t mask = cap - 1;
    size_t i = ptr_hash(p) & mask;
    while (tab[i] != NULL) {
        i = (i + 1) & mask;
    }
    tab[i] = p;
}

/* Returns 0 on success, -1 with MemoryError set. */
static int
fset_add(void *p)
{
    if (fset_contains(p)) {
        return 0;
    }
    if ((fused + 1) * 2 > fcap) { /* keep load (with tombstones) <= 1/2 */
        size_t ncap = fcap ? fcap : 64;
        while ((fcount + 1) * 4 > ncap) {
            ncap *= 2;
        }
        void **ntab = PyMem_RawCalloc(ncap, sizeof(void *));
        if (ntab == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < fcap; i++) {
            if (fset[i] != NULL && fset[i] != TOMB) {
                fset_insert_raw(ntab, ncap, fset[i]);
            }
        }
        PyMem_RawFree(fset);
        fset = ntab;
        fcap = ncap;
        fused = fcount;
    }
    fset_insert_raw(fset, fcap, p);
    fcount++;
    fused++;
    return 0;
}

/* ---- callbacks: no C-API calls, no exceptions, always 0 ---- */

static int
dict_cb(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    (void)dict;
    (void)key;
    (void)new_value;
    if (event != PyDict_EVENT_DEALLOCATED) {
        counter++;
    }
    return 0;
}

static int
type_cb(PyTypeObject *type)
{
    (void)type;
    counter++;
    /* CPython fires a type watcher only while the type holds a valid version tag, and
       invalidates the tag right after. version() re-assigns tags of watched types on its
       next call so that a later bases/MRO change fires again. */
    rearm_pending = 1;
    return 0;
}

static int
func_cb(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    (void)new_value;
    if (event == PyFunction_EVENT_CREATE || fcount == 0) {
        return 0;
    }
    if (event == PyFunction_EVENT_DESTROY) {
        fset_remove(func);
        return 0;
    }
    if (fset_contains(func)) {
        counter++;
    }
    return 0;
}

/* ---- watched types: {address: weakref} so version() can re-arm them ---- */
static PyObject *watched_types = NULL;

/* 1 when ref points to obj (alive), else 0; never fails. */
static int
ref_is(PyObject *ref, PyObject *obj)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *cur = NULL;
    if (PyWeakref_GetRef(ref, &cur) < 0) {
        PyErr_Clear();
        return 0;
    }
    int same = cur == obj;
    Py_XDECREF(cur);
    return same && obj != NULL;
#else
    PyObject *cur = PyWeakref_GetObject(ref); /* borrowed; Py_None when dead */
    return cur != NULL && cur != Py_None && cur == obj;
#endif
}

/* New reference to the referent, or NULL (no exception) when dead. */
static PyObject *
ref_get(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *cur = NULL;
    if (PyWeakref_GetRef(ref, &cur) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return cur;
#else
    PyObject *cur = PyWeakref_GetObject(ref);
    if (cur == NULL || cur == Py_None) {
        PyErr_Clear();
        return NULL;
    }
    return Py_NewRef(cur);
#endif
}

static void
rearm_types(void)
{
    rearm_pending = 0;
    if (watched_types == NULL) {
        return;
    }
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *dead = PyList_New(0);
    PyObject *key, *ref;
    Py_ssize_t pos = 0;
    while (dead != NULL && PyDict_Next(watched_types, &pos, &key, &ref)) {
        PyObject *t = ref_get(ref);
        if (t == NULL) {
            if (PyList_Append(dead, key) < 0) {
                break;
            }
            continue;
        }
        (void)PyUnstable_Type_AssignVersionTag((PyTypeObject *)t);
        Py_DECREF(t);
    }
    if (dead != NULL) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dead); i++) {
            (void)PyDict_DelItem(watched_types, PyList_GET_ITEM(dead, i));
        }
        Py_DECREF(dead);
    }
    PyErr_Clear();
    PyErr_SetRaisedException(exc);
}

/* ---- module functions ---- */

/* version() for C callers: never fails, never leaves an exception set. */
static unsigned long long
api_version(void)
{
    if (rearm_pending) {
        rearm_types();
    }
    if (broken) {
        counter++;
    }
    return counter;
}

static const FlydepsWatchAPI c_api = {FLYDEPS_WATCH_API_ABI, api_version};

static PyObject *
w_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(api_version());
}

static PyObject *
w_set_broken(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    broken = 1;
    counter++;
    Py_RETURN_NONE;
}

/* Register a watcher kind once per process: 0, or -1 with the exception set (no free id). */
#define ENSURE_WATCHER(wid, add, cb) ((wid) >= 0 ? 0 : (((wid) = add(cb)) < 0 ? -1 : 0))

/* 0 when ok is true, else -1 with a TypeError naming the expected kind. */
static int
expect(int ok, const char *func, const char *kind, PyObject *obj)
{
    if (ok) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() needs %s, not %.100s", func, kind, Py_TYPE(obj)->tp_name);
    return -1;
}

static PyObject *
w_watch_dict(PyObject *self, PyObject *d)
{
    (void)self;
    if (expect(PyDict_Check(d), "watch_dict", "a dict", d) < 0 ||
        ENSURE_WATCHER(dict_wid, PyDict_AddWatcher, dict_cb) < 0 || PyDict_Watch(dict_wid, d) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
w_watch_type(PyObject *self, PyObject *t)
{
    (void)self;
    if (expect(PyType_Check(t), "watch_type", "a type", t) < 0 ||
        ENSURE_WATCHER(type_wid, PyType_AddWatcher, type_cb) < 0) {
        return NULL;
    }
    if (watched_types == NULL) {
        watched_types = PyDict_New();
        if (watched_types == NULL) {
            return NULL;
        }
    }
    /* The type's own dict: every attribute set/delete goes through it, whatever the state of
       the type's version tag. */
    PyObject *tdict = PyType_GetDict((PyTypeObject *)t);
    if (tdict == NULL) {
        return NULL;
    }
    int rc = ENSURE_WATCHER(dict_wid, PyDict_AddWatcher, dict_cb);
    if (rc == 0) {
        rc = PyDict_Watch(dict_wid, tdict);
    }
    Py_DECREF(tdict);
    if (rc < 0 || PyType_Watch(type_wid, t) < 0) {
        return NULL;
    }
    (void)PyUnstable_Type_AssignVersionTag((PyTypeObject *)t);
    PyObject *key = PyLong_FromVoidPtr(t);
    if (key == NULL) {
        return NULL;
    }
    PyObject *old = PyDict_GetItemWithError(watched_types, key); /* borrowed */
    if (old == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    if (old == NULL || !ref_is(old, t)) {
        PyObject *ref = PyWeakref_NewRef(t, NULL);
        if (ref == NULL) {
            /* A type without weakref support cannot be re-armed: still watched once. */
            PyErr_Clear();
        }
        else {
            rc = PyDict_SetItem(watched_types, key, ref);
            Py_DECREF(ref);
            if (rc < 0) {
                Py_DECREF(key);
                return NULL;
            }
        }
    }
    Py_DECREF(key);
    Py_RETURN_NONE;
}

static PyObject *
w_watch_function(PyObject *self, PyObject *f)
{
    (void)self;
    if (expect(PyFunction_Check(f), "watch_function", "a Python function", f) < 0 ||
        ENSURE_WATCHER(func_wid, PyFunction_AddWatcher, func_cb) < 0 || fset_add(f) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
w_info(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("{s:i,s:i,s:i,s:n,s:n,s:n,s:i}",
                         "dict_watcher", dict_wid, "type_watcher", type_wid,
                         "function_watcher", func_wid,
                         "functions", (Py_ssize_t)fcount, "function_slots", (Py_ssize_t)fcap,
                         "types", watched_types ? PyDict_GET_SIZE(watched_types) : (Py_ssize_t)0,
                         "broken", broken);
}

static PyMethodDef methods[] = {
    {"version", w_version, METH_NOARGS, "version() -> int: bumped by every watched modification."},
    {"watch_dict", w_watch_dict, METH_O, "watch_dict(d): later mutations of d bump version()."},
    {"watch_type", w_watch_type, METH_O, "watch_type(t): later attribute/bases changes of t bump version()."},
    {"watch_function", w_watch_function, METH_O,
     "watch_function(f): later __code__/__defaults__/__kwdefaults__ changes of f bump version()."},
    {"_set_broken", w_set_broken, METH_NOARGS, "make every later version() call return a new value."},
    {"_info", w_info, METH_NOARGS, "watcher ids and bookkeeping sizes."},
    {NULL, NULL, 0, NULL},
};

static int
fill(PyObject *module)
{
    return cext_add_capsule(module, &c_api, FLYDEPS_WATCH_CAPSULE);
}

CEXT_MODULE(_watchext, "_watchext",
            "CPython watcher backend of flydeps.watch.watchers (see that module for the contract).", methods, NULL,
            fill)
