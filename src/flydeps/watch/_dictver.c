/* flydeps.watch._dictver: PEP 509 dict version tags read from C, for CPython 3.10 and 3.11.
 *
 * Contract (the Python side is flydeps/watch/watchers.py, which documents the public API):
 *   tags_max(dicts: tuple[dict, ...]) -> int
 *       the largest ma_version_tag among the dicts. CPython 3.10/3.11 give every dict
 *       modification (set to a different object, delete, pop, popitem, clear, update, merge)
 *       a fresh tag from one process-wide counter that only grows, so the largest tag of a
 *       fixed set of dicts changes exactly when one of them was modified: a guard compares one
 *       integer instead of re-reading every binding. Re-setting the very same object does not
 *       change a tag (and changes nothing a guard checks).
 *   _C_API  capsule "flydeps.watch._dictver._C_API" holding a FlydepsDictVerAPI
 *       {abi = 1, tags_max}: the same read from C without a Python call (flydeps/builds/_fastcache.c).
 *
 * The field is public in CPython 3.10/3.11 (cpython/dictobject.h) and deprecated from 3.12,
 * where dict watchers (flydeps.watch._watchext) replace it; this module refuses to build there.
 */
#include "cext.h"
#include "capi.h"

#include <stdint.h>

#if PY_VERSION_HEX >= 0x030C0000 || PY_VERSION_HEX < 0x030A0000
#error "flydeps.watch._dictver is for CPython 3.10 and 3.11 (3.12+ uses dict watchers)"
#endif

/* The largest tag of a tuple of exact dicts; the caller has checked the types. */
static unsigned long long
tags_max_unchecked(PyObject *dicts)
{
    unsigned long long best = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(dicts);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long tag = (unsigned long long)((PyDictObject *)PyTuple_GET_ITEM(dicts, i))->ma_version_tag;
        if (tag > best) {
            best = tag;
        }
    }
    return best;
}

/* For C callers: -1 (with TypeError set) when dicts is not a tuple of dicts. */
static long long
api_tags_max(PyObject *dicts)
{
    if (!PyTuple_Check(dicts)) {
        PyErr_SetString(PyExc_TypeError, "tags_max() takes a tuple of dicts");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dicts); i++) {
        if (!PyDict_Check(PyTuple_GET_ITEM(dicts, i))) {
            PyErr_Format(PyExc_TypeError, "tags_max() takes a tuple of dicts, item %zd is %.200s", i,
                         Py_TYPE(PyTuple_GET_ITEM(dicts, i))->tp_name);
            return -1;
        }
    }
    return (long long)(tags_max_unchecked(dicts) & 0x7fffffffffffffffULL);
}

static const FlydepsDictVerAPI c_api = {FLYDEPS_DICTVER_API_ABI, api_tags_max};

static PyObject *
d_tags_max(PyObject *self, PyObject *dicts)
{
    (void)self;
    long long best = api_tags_max(dicts);
    return best < 0 ? NULL : PyLong_FromLongLong(best);
}

static PyObject *
d_tag(PyObject *self, PyObject *d)
{
    (void)self;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "tag() takes a dict, not %.200s", Py_TYPE(d)->tp_name);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)((PyDictObject *)d)->ma_version_tag);
}

static PyMethodDef methods[] = {
    {"tags_max", d_tags_max, METH_O, "tags_max(dicts: tuple) -> int: the largest PEP 509 version tag among them."},
    {"tag", d_tag, METH_O, "tag(d) -> int: the PEP 509 version tag of one dict (tests)."},
    {NULL, NULL, 0, NULL},
};

static int
fill(PyObject *module)
{
    return cext_add_capsule(module, &c_api, FLYDEPS_DICTVER_CAPSULE);
}

CEXT_MODULE(_dictver, "_dictver",
            "PEP 509 dict version tags for flydeps guards on CPython 3.10/3.11 (see flydeps.watch.watchers).", methods,
            NULL, fill)
