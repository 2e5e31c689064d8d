/* flydsl_runtime.persist._capi: a function of FlyDSL's loaded C API library, called without ctypes.
 *
 * Contract (the Python side is flydsl_runtime/persist/index.py, rocm_root(), whose ctypes path is
 * the fallback; tests/runtime/test_index.py holds the two equal, test_capi_robustness.py
 * what is refused):
 *
 *   string_ref(library, symbol) -> bytes | None
 *       Calls ``MlirStringRef symbol(void)`` of the shared library at ``library`` if this
 *       process has already loaded it (dlopen with RTLD_NOLOAD: never a second copy, never a
 *       load) and returns the bytes it points to (b"" for a null pointer); None where the
 *       library is not loaded or has no such symbol. MLIR's C API StringRef is
 *       ``{const char *data; size_t length}``, returned by value.
 *
 * What is validated (a call through a function pointer trusts its signature, so a caller
 * naming any other function of any loaded library, e.g. libc's ``getpid``, crashed the
 * process): both arguments are str (TypeError); ``library`` has no NUL (ValueError) and is
 * an absolute path (ValueError: no search path is consulted); ``symbol`` is one of
 * KNOWN_STRING_REFS below, the FlyDSL C API functions known to be ``MlirStringRef f(void)``
 * (ValueError naming them, without calling anything); a returned length that does not fit
 * a Py_ssize_t is a ValueError. The library handle is never a caller's: it is the one
 * dlopen(RTLD_NOLOAD) gives for the path, and it is released before returning.
 *
 * ctypes does the same in ~0.4 ms of a new process's first call (loading the library
 * handle, building the structure class); this is ~5 µs. Holds no state.
 */
#include "cext.h"

#include <dlfcn.h>
#include <string.h>

typedef struct {
    const char *data;
    size_t length;
} StringRef;

typedef StringRef (*string_ref_fn)(void);

/* The only functions string_ref() calls: FlyDSL C API functions of type MlirStringRef(void). */
static const char *const KNOWN_STRING_REFS[] = {"mlirFlyROCDLGetROCMPath", NULL};

/* 0 where `symbol` (`size` bytes, NULs included: the str `text`) is a known
 * MlirStringRef(void) function, else -1 with ValueError set (the message lists the known ones). */
static int
known_string_ref(PyObject *text, const char *symbol, Py_ssize_t size)
{
    for (const char *const *known = KNOWN_STRING_REFS; *known != NULL; known++) {
        if ((size_t)size == strlen(*known) && memcmp(symbol, *known, (size_t)size) == 0) {
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "string_ref(): %.200R is not a FlyDSL C API function this module knows to return an "
                 "MlirStringRef and take no argument (known: %s); nothing was called",
                 text, KNOWN_STRING_REFS[0]);
    return -1;
}

/* The symbol as UTF-8 if it is a known function, else NULL with an exception set. */
static const char *
checked_symbol(PyObject *text)
{
    Py_ssize_t size;
    const char *symbol = PyUnicode_AsUTF8AndSize(text, &size);
    if (symbol == NULL || known_string_ref(text, symbol, size) < 0) {
        return NULL;
    }
    return symbol;
}

/* The library path as bytes if it is absolute (and without NUL), else NULL with an exception set. */
static PyObject *
checked_library(PyObject *text)
{
    PyObject *library = NULL;
    if (!PyUnicode_FSConverter(text, &library)) {
        return NULL;
    }
    if (PyBytes_AS_STRING(library)[0] != '/') {
        PyErr_Format(PyExc_ValueError, "string_ref(): library must be an absolute path, got %R", text);
        Py_DECREF(library);
        return NULL;
    }
    return library;
}

static PyObject *
string_ref(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "string_ref(library: str, symbol: str)");
        return NULL;
    }
    const char *symbol = checked_symbol(args[1]);
    PyObject *library = symbol ? checked_library(args[0]) : NULL;
    if (library == NULL) {
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
    PyObject *out = NULL;
    if (ref.data != NULL && ref.length > (size_t)PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_ValueError, "string_ref(): %s returned a length of %zu bytes", symbol, ref.length);
    }
    else {
        out = PyBytes_FromStringAndSize(ref.data ? ref.data : "", ref.data ? (Py_ssize_t)ref.length : 0);
    }
    dlclose(handle); /* drops the reference RTLD_NOLOAD took; the library stays loaded */
    return out;
}

static PyMethodDef methods[] = {
    {"string_ref", (PyCFunction)(void (*)(void))string_ref, METH_FASTCALL,
     "string_ref(library, symbol) -> bytes | None: MlirStringRef symbol(void) of a loaded library."},
    {NULL, NULL, 0, NULL},
};

CEXT_MODULE(_capi, "flydsl_runtime.persist._capi", "FlyDSL's C API functions called without ctypes.", methods, NULL,
            NULL)
