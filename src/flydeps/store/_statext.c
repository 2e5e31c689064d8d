/* flydeps.store._statext: file-system metadata in bulk, in C, for a new process's first call.
 *
 * Contract (the Python side is flydeps/store/fsmeta.py, which is the specification and the
 * fallback; tests/core/test_fsmeta.py holds the two equal on files, links, dangling links,
 * unreadable directories and undecodable names):
 *
 *   file_states(directory, names) -> bytes
 *       For each name, in order: "<name> <st_size> <st_mtime_ns> <st_ino>\0" of the file
 *       (stat, following symbolic links), or "<name> unreadable <errno>\0" when the stat
 *       fails, the name encoded UTF-8 with surrogatepass: the bytes _fsmeta._file_states_py
 *       builds with os.stat(name, dir_fd=...). The directory is opened once and each name
 *       stat'ed relative to it; where it cannot be opened, each path is joined and stat'ed
 *       (os.path.join's rule for a relative name). A name with a NUL raises ValueError,
 *       as os.stat does; names not a list or tuple of str, TypeError. The names are copied
 *       into a tuple first: the GIL is released around each stat.
 *
 *   realpath(path) -> str | None
 *       realpath(3) of path (absolute, symbolic links and "." / ".." resolved), decoded as
 *       os.fsdecode does; None where realpath(3) fails (a missing component, a loop, a
 *       permission) or the path holds a NUL: the caller then asks os.path.realpath, whose
 *       non-strict answer for those cases realpath(3) does not give.
 *
 * Reads file metadata only (no file content); holds no state.
 */
#include "cext.h"
#include "bytebuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_DIRECTORY
#define O_DIRECTORY 0
#endif
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* Append "<name><middle>\0": middle is " size mtime ino" or " unreadable errno". */
static int
append_line(Buf *out, PyObject *name, const char *middle)
{
    PyObject *text = PyUnicode_AsEncodedString(name, "utf-8", "surrogatepass");
    if (text == NULL) {
        return -1;
    }
    int rc = buf_put(out, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text));
    Py_DECREF(text);
    if (rc == 0) rc = buf_put(out, middle, (Py_ssize_t)strlen(middle) + 1); /* with its NUL */
    return rc;
}

#if defined(__APPLE__)
#define MTIME_SEC(st) ((st).st_mtimespec.tv_sec)
#define MTIME_NSEC(st) ((st).st_mtimespec.tv_nsec)
#else
#define MTIME_SEC(st) ((st).st_mtim.tv_sec)
#define MTIME_NSEC(st) ((st).st_mtim.tv_nsec)
#endif

static PyObject *
file_states(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "file_states(directory: str, names: sequence of str)");
        return NULL;
    }
    if (!PyList_Check(args[1]) && !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "file_states: names must be a list or tuple of str");
        return NULL;
    }
    /* A tuple of our own: a list the caller shares could change while the GIL is released. */
    PyObject *names = PySequence_Tuple(args[1]);
    if (names == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (count == 0) { /* as the Python function: the directory is not even looked at */
        Py_DECREF(names);
        return PyBytes_FromStringAndSize("", 0);
    }
    Buf lines = CEXT_BUF_INIT;
    PyObject *dir_bytes = NULL;
    int fd = -1;
    if (!PyUnicode_FSConverter(args[0], &dir_bytes)) {
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    fd = open(PyBytes_AS_STRING(dir_bytes), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    Py_END_ALLOW_THREADS
    const char *dir = PyBytes_AS_STRING(dir_bytes);
    size_t dir_len = (size_t)PyBytes_GET_SIZE(dir_bytes);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "file_states: names must be str");
            goto fail;
        }
        PyObject *name_bytes = NULL;
        if (!PyUnicode_FSConverter(name, &name_bytes)) { /* a NUL: ValueError, as os.stat */
            goto fail;
        }
        const char *nm = PyBytes_AS_STRING(name_bytes);
        size_t nm_len = (size_t)PyBytes_GET_SIZE(name_bytes);
        struct stat st;
        int rc, err = 0;
        if (fd >= 0) {
            Py_BEGIN_ALLOW_THREADS
            rc = fstatat(fd, nm, &st, 0);
            if (rc != 0) err = errno;
            Py_END_ALLOW_THREADS
        }
        else { /* os.path.join(directory, name) */
            char *path = NULL;
            if (nm[0] == '/' || dir_len == 0) {
                path = strdup(nm);
            }
            else {
                int slash = dir[dir_len - 1] != '/';
                path = malloc(dir_len + (size_t)slash + nm_len + 1);
                if (path != NULL) {
                    memcpy(path, dir, dir_len);
                    if (slash) path[dir_len] = '/';
                    memcpy(path + dir_len + (size_t)slash, nm, nm_len + 1);
                }
            }
            if (path == NULL) {
                Py_DECREF(name_bytes);
                PyErr_NoMemory();
                goto fail;
            }
            Py_BEGIN_ALLOW_THREADS
            rc = stat(path, &st);
            if (rc != 0) err = errno;
            Py_END_ALLOW_THREADS
            free(path);
        }
        Py_DECREF(name_bytes);
        char middle[128];
        if (rc == 0) {
            long long mtime_ns = (long long)MTIME_SEC(st) * 1000000000LL + (long long)MTIME_NSEC(st);
            snprintf(middle, sizeof middle, " %lld %lld %llu", (long long)st.st_size, mtime_ns,
                     (unsigned long long)st.st_ino);
        }
        else {
            snprintf(middle, sizeof middle, " unreadable %d", err);
        }
        if (append_line(&lines, name, middle) < 0) {
            goto fail;
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    Py_DECREF(dir_bytes);
    Py_DECREF(names);
    PyObject *joined = PyBytes_FromStringAndSize(lines.data ? lines.data : "", lines.len);
    buf_free(&lines);
    return joined;
fail:
    if (fd >= 0) {
        close(fd);
    }
    Py_XDECREF(dir_bytes);
    buf_free(&lines);
    Py_DECREF(names);
    return NULL;
}

static PyObject *
real_path(PyObject *Py_UNUSED(module), PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "realpath(path: str)");
        return NULL;
    }
    PyObject *path_bytes = PyUnicode_EncodeFSDefault(arg);
    if (path_bytes == NULL) {
        return NULL;
    }
    const char *path = PyBytes_AS_STRING(path_bytes);
    if ((size_t)PyBytes_GET_SIZE(path_bytes) != strlen(path)) { /* a NUL: os.path.realpath decides */
        Py_DECREF(path_bytes);
        Py_RETURN_NONE;
    }
    char *resolved;
    Py_BEGIN_ALLOW_THREADS
    resolved = realpath(path, NULL);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (resolved == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *out = PyUnicode_DecodeFSDefault(resolved);
    free(resolved);
    return out;
}

static PyMethodDef methods[] = {
    {"file_states", (PyCFunction)(void (*)(void))file_states, METH_FASTCALL,
     "file_states(directory, names) -> bytes: each name's stat line (see flydeps.store.fsmeta)."},
    {"realpath", (PyCFunction)real_path, METH_O,
     "realpath(path) -> str | None: realpath(3), None where it fails (see flydeps.store.fsmeta)."},
    {NULL, NULL, 0, NULL},
};

CEXT_MODULE(_statext, "flydeps.store._statext", "File-system metadata in bulk (flydeps.store.fsmeta).", methods, NULL,
            NULL)
