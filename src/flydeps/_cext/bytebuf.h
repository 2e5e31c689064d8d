/* flydeps C extensions: a growable byte buffer (_scanext.c, _statext.c).
 *
 * Contract: a Buf starts as CEXT_BUF_INIT; buf_put appends bytes, growing the memory
 * (PyMem_Realloc, doubling from 256 bytes); the owner releases it with buf_free (safe on
 * an empty or partly filled buffer). Header-only: each extension is its own module.
 */
#ifndef FLYDEPS_CEXT_BYTEBUF_H
#define FLYDEPS_CEXT_BYTEBUF_H

#include "cext.h"

#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

#define CEXT_BUF_INIT {NULL, 0, 0}

/* Append n bytes of src; -1 with MemoryError set when the buffer cannot grow. */
static inline int
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

/* Release the memory; the Buf is empty (CEXT_BUF_INIT) afterwards. */
static inline void
buf_free(Buf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

#endif /* FLYDEPS_CEXT_BYTEBUF_H */
