/* flydsl_runtime._capi: a function of FlyDSL's loaded C API library, called without ctypes.
 *
 * Contract (the Python side is flydsl_runtime/index.py, rocm_root(), whose ctypes path is
 * the fallback; tests/runtime/test_capi.py holds the two equal):
 *
 *   string_ref(library, symbol) -> bytes | None
 *       Calls ``MlirStringRef symbol(void)`` of the shared library at ``library`` if this
 *       process has already loaded it (dlopen with RTLD_NOLOAD: never a second copy, never a
 *       load) and returns the bytes it points to (b"" for a null pointer); None where the
 *       library is not loaded or has no such symbol. MLIR's C API StringRef is
 *       ``{const char *data; size_t length}``, returned by value.
 *
 * ctypes does the same in ~0.4 ms of a new process's first call (loading the library
 * handle, building the structure class); this is ~5 µs. Holds no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

typedef struct {
    const char *data;
    size_t length;
} StringRef;

typedef StringRef (*string_ref_fn)(void);

static PyObject *
string_ref(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "string_ref(library: str, symbol: str)");
        return NULL;
    }
    PyObject *library = NULL;
    if (!PyUnicode_FSConverter(args[0], &library)) {
        return NULL;
    }
    const char *symbol = PyUnicode_AsUTF8(args[1]);
    if (symbol == NULL) {
        Py_DECREF(library);
        return NULL;
    }
    void *handle = dlopen(PyBytes_AS_STRING(library), RTLD_NOLOAD | RTLD_LAZY);
    Py_DECREF(library);
    if (handle == NULL) {
        Py_RETURN_NONE;
    }
    void *found = dlsym(handle, symbol);
    if (found == NULL) {
        dlclose(handle);
        Py_RETURN_NONE;
    }
    string_ref_fn fn;
    *(void **)(&fn) = found;
    StringRef ref = fn();
    PyObject *out = PyBytes_FromStringAndSize(ref.data ? ref.data : "", ref.data ? (Py_ssize_t)ref.length : 0);
    dlclose(handle); /* drops the reference RTLD_NOLOAD took; the library stays loaded */
    return out;
}

static PyMethodDef methods[] = {
    {"string_ref", (PyCFunction)(void (*)(void))string_ref, METH_FASTCALL,
     "string_ref(library, symbol) -> bytes | None: MlirStringRef symbol(void) of a loaded library."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "flydsl_runtime._capi", "FlyDSL's C API functions called without ctypes.", -1, methods,
};

PyMODINIT_FUNC
PyInit__capi(void)
{
    return PyModule_Create(&moduledef);
}
