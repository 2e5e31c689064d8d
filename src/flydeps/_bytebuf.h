/* A growable byte buffer for flydeps' C extensions (_scanext.c, _statext.c): append with
 * buf_put, release with PyMem_Free(b.data). Header-only: each extension is its own module. */
#ifndef FLYDEPS_BYTEBUF_H
#define FLYDEPS_BYTEBUF_H

#include <Python.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

/* Append n bytes of src; -1 with MemoryError set when the buffer cannot grow. */
static int
buf_put(Buf *b, const char *src, Py_ssize_t n)
{
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) {
            cap *= 2;
        }
        char *data = PyMem_Realloc(b->data, (size_t)cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

#endif
