/* flydeps C extensions: the boilerplate every extension module shares, written once.
 *
 * Contract: include this header first (it defines PY_SSIZE_T_CLEAN and includes Python.h).
 * Everything here is `static inline` (header-only: each extension is its own shared
 * object; what a module does not use costs nothing and does not warn):
 *
 *   CEXT_MODULE(NAME, M_NAME, DOC, METHODS, PREPARE, FILL)
 *       the single-phase PyModuleDef (m_size -1) and PyInit_NAME: PREPARE() (before the
 *       module exists: type readying, interned strings) and FILL(module) (after: types,
 *       capsules, constants), either NULL; each returns 0, or -1 with an exception set.
 *   cext_add_type(module, name, type)          a static type as a module attribute
 *   cext_add_capsule(module, api, name)        export a C API as the module's `_C_API`
 *   cext_import_capsule(module, name, abi)     a sibling extension's C API (capi.h), or NULL
 *                                              with no exception when absent or another ABI
 *   CEXT_FIELD / CEXT_FIELDS_END, cext_visit_fields, cext_clear_fields, cext_gc_dealloc
 *       GC boilerplate driven by one list of a type's object fields (traverse and clear
 *       cannot disagree)
 *   CextName, cext_intern_all                  interned attribute names, made once per process
 *   cext_nargs_ok(nargs, lo, hi, signature)    METH_FASTCALL argument count check
 *   cext_optional_attr(obj, name, &result)     PyObject_GetOptionalAttr on every version
 *
 * The other headers of this directory: bytebuf.h (growable byte buffer), capi.h (the
 * capsule layouts shared by _watchext/_dictver and _fastcache).
 */
#ifndef FLYDEPS_CEXT_H
#define FLYDEPS_CEXT_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stddef.h>

/* ------------------------------------------------------------------ module init */

/* PREPARE(), PyModule_Create(def), FILL(module): the module, or NULL with an exception. */
static inline PyObject *
cext_module_create(struct PyModuleDef *def, int (*prepare)(void), int (*fill)(PyObject *))
{
    if (prepare != NULL && prepare() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(def);
    if (module == NULL) {
        return NULL;
    }
    if (fill != NULL && fill(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

/* Defines the module's PyModuleDef and its init function PyInit_NAME. */
#define CEXT_MODULE(NAME, M_NAME, DOC, METHODS, PREPARE, FILL)                                                     \
    static struct PyModuleDef NAME##_moduledef = {                                                                 \
        PyModuleDef_HEAD_INIT,                                                                                     \
        .m_name = (M_NAME),                                                                                        \
        .m_doc = (DOC),                                                                                            \
        .m_size = -1,                                                                                              \
        .m_methods = (METHODS),                                                                                    \
    };                                                                                                             \
    PyMODINIT_FUNC PyInit_##NAME(void)                                                                             \
    {                                                                                                              \
        return cext_module_create(&NAME##_moduledef, (PREPARE), (FILL));                                          \
    }

/* A static type (already PyType_Ready) as module attribute `name`: 0, or -1 with an exception. */
static inline int
cext_add_type(PyObject *module, const char *name, PyTypeObject *type)
{
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ capsules */

/* Export `api` (a layout of capi.h, static storage) as the capsule `name`, attribute _C_API:
   0, or -1 with an exception. */
static inline int
cext_add_capsule(PyObject *module, const void *api, const char *name)
{
    PyObject *capsule = PyCapsule_New((void *)api, name, NULL);
    if (capsule == NULL || PyModule_AddObject(module, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        return -1;
    }
    return 0;
}

/* The C API that extension `module` exports as capsule `name`, if it is built and its layout
   has ABI number `abi` (the first field of every capi.h layout); else NULL, with no exception
   set: the caller runs without it. */
static inline const void *
cext_import_capsule(const char *module, const char *name, unsigned int abi)
{
    /* PyCapsule_Import only walks attributes: import the submodule first. */
    PyObject *mod = PyImport_ImportModule(module);
    const void *api = NULL;
    if (mod != NULL) {
        api = PyCapsule_Import(name, 0);
        Py_DECREF(mod);
    }
    if (api == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return *(const unsigned int *)api == abi ? api : NULL;
}

/* ------------------------------------------------------------------ GC types */

/* A type's object fields: CEXT_FIELD(Type, member), ..., CEXT_FIELDS_END. */
#define CEXT_FIELD(TYPE, MEMBER) ((Py_ssize_t)offsetof(TYPE, MEMBER))
#define CEXT_FIELDS_END ((Py_ssize_t)-1)

static inline PyObject **
cext_field(PyObject *self, Py_ssize_t offset)
{
    return (PyObject **)((char *)self + offset);
}

/* tp_traverse body: visit each listed field (NULL fields are skipped). */
static inline int
cext_visit_fields(PyObject *self, const Py_ssize_t *fields, visitproc visit, void *arg)
{
    for (; *fields != CEXT_FIELDS_END; fields++) {
        Py_VISIT(*cext_field(self, *fields));
    }
    return 0;
}

/* tp_clear body (and a non-GC dealloc's releases): clear each listed field, in order. */
static inline void
cext_clear_fields(PyObject *self, const Py_ssize_t *fields)
{
    for (; *fields != CEXT_FIELDS_END; fields++) {
        Py_CLEAR(*cext_field(self, *fields));
    }
}

/* tp_dealloc of a GC type: untrack, clear weak references (weakreflist: the instance's
   list, NULL when it has none or the type takes none), tp_clear, free. */
static inline void
cext_gc_dealloc(PyObject *self, inquiry clear, PyObject *weakreflist)
{
    PyObject_GC_UnTrack(self);
    if (weakreflist != NULL) {
        PyObject_ClearWeakRefs(self);
    }
    (void)clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* ------------------------------------------------------------------ names and arguments */

typedef struct {
    PyObject **slot;
    const char *text;
} CextName;

/* Intern each text into its slot, once per process (a slot already set is kept):
   0, or -1 with the exception set. */
static inline int
cext_intern_all(const CextName *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return -1;
        }
    }
    return 0;
}

#define CEXT_INTERN_ALL(NAMES) cext_intern_all((NAMES), sizeof(NAMES) / sizeof((NAMES)[0]))

/* 1 when lo <= nargs <= hi, else 0 with a TypeError naming the signature. */
static inline int
cext_nargs_ok(Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi, const char *signature)
{
    if (nargs >= lo && nargs <= hi) {
        return 1;
    }
    PyErr_Format(PyExc_TypeError, "%s takes %zd to %zd arguments (%zd given)", signature, lo, hi, nargs);
    return 0;
}

/* Attribute `name` of obj in *result (new reference): 1 found, 0 missing (*result NULL, no
   exception), -1 another error. PyObject_GetOptionalAttr before CPython 3.13 too. */
static inline int
cext_optional_attr(PyObject *obj, PyObject *name, PyObject **result)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, result);
#else
    return _PyObject_LookupAttr(obj, name, result);
#endif
}

#endif /* FLYDEPS_CEXT_H */
