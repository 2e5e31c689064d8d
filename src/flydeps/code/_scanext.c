/* flydeps.code._scanext: the direct co_code decoder's inner loop in C, for CPython 3.10-3.13.
 *
 * Contract (the Python side is flydeps/code/scan.py, which is the specification and the
 * fallback; tests/core/test_bytecode_decoder.py holds the two byte for byte equal, and
 * both equal to the dis reference, on the standard library of each version):
 *
 *   configure(kinds, sizes, shifts, ref_class, names, tokens, pair_first, pair_second,
 *             pair_classes, extended_arg, swap, localsplus, normalizes_jumps, tag, flags_ignored,
 *             name_ref) -> None
 *       this interpreter's opcode tables (flydeps.code.opcodes.TABLE), once at import: four
 *       256-byte strings (argument kind, code units with inline caches, name-flag shift,
 *       the reference class of the opcodes whose arguments references read, R_* below,
 *       0 for the others), 256 opnames, 256 opening tokens (b"\n" + name), the halves of
 *       3.13 super-instructions (str or None) and a 512-byte string of their reference
 *       classes (first halves, then second halves), EXTENDED_ARG, SWAP (-1: none),
 *       whether local indices cover cells and free variables (3.11+), and whether a code
 *       object with jumps needs a jump-layout rule (3.10, 3.13: flydeps.code.normalize), the
 *       digest's tag, the code flags the header leaves out (_codescan.header) and the
 *       NameRef class (a tuple subclass) the references are made of.
 *
 *   scan(code, raw, const_token) -> (stream, refs) | (units, tokens, jumps, refs, has_swap) | None
 *       raw is code.co_code; const_token(value) -> bytes is flydeps.code.bytecode.canonical_const
 *       (called for constants other than None, bools, Ellipsis, exact ints and strs).
 *       refs: the names the code reads, a tuple of flydeps.code.bytecode.NameRef (scope, name,
 *       attrs, level) in first-use order (refs_from's rules, applied to the
 *       same instructions). (stream, refs): every byte the digest hashes (the header of
 *       _codescan.header, the instructions, jump targets as instruction indices, the
 *       exception table): no layout rule applies. The 5-tuple: what _codescan._scan gives, with refs (a SWAP is
 *       present or a jump-layout rule applies: Python finishes). None: something this loop
 *       does not decode (the Python decoder then decodes the whole code object), malformed
 *       bytecode included: an odd-length co_code, an EXTENDED_ARG chain wider than
 *       ARG_MAX, an index past co_consts / co_names / the variables, a jump outside
 *       0..len(co_code)//2, cut inline caches, a cut or over-wide exception-table field.
 *       The Python loop raises flydeps.errors.MalformedCodeError for each, so both paths
 *       give one message. Every index is checked before it is read (raw may be any bytes:
 *       it is bounded by its own length); configure() refuses while a scan runs (the
 *       const_token call is Python code) and validates every table it is given.
 *
 * Reads only the code object's public attributes; runs no user code (canonical_const is
 * flydeps's own); holds no state besides the tables.
 */
#include "cext.h"
#include "bytebuf.h"

#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030A0000 || PY_VERSION_HEX >= 0x030E0000
#error "flydeps.code._scanext is for CPython 3.10-3.13 (the tables of flydeps.code.opcodes)"
#endif

enum { K_NONE = 0, K_FILLER, K_RAW, K_CONST, K_NAME, K_LOCAL, K_FREE, K_PAIR, K_JFWD, K_JBACK, K_JABS };
/* Reference classes (flydeps.code.bytecode.refs_from): R_OTHER is read but only ends a chain. */
enum { R_NONE = 0, R_OTHER, R_ATTR, R_GLOBAL, R_NAME, R_LOCAL, R_DEREF, R_IMPORT_NAME, R_IMPORT_FROM, R_CONST };

/* The widest argument the interpreter reads as written (its oparg is a C int): a longer
 * EXTENDED_ARG chain, or a wider exception-table field, is malformed (_codescan.ARG_MAX). */
#define ARG_MAX 0x7FFFFFFFUL

static struct {
    int ready;
    int scanning; /* scans running (const_token is Python code): configure() waits for none */
    unsigned char kinds[256], sizes[256], shifts[256], ref_class[256], pair_class[512];
    PyObject *names;       /* tuple of 256 str */
    PyObject *tokens;      /* tuple of 256 bytes */
    PyObject *pair_first;  /* tuple of 256 str-or-None */
    PyObject *pair_second;
    int extended_arg, swap, localsplus, normalizes_jumps;
    PyObject *tag; /* bytes */
    long flags_ignored;
    PyObject *name_ref; /* the NameRef class */
} T;

/* A code object's tables, new references (the public fields or getters of each version). */
static PyObject *
code_consts(PyObject *code)
{
    return Py_NewRef(((PyCodeObject *)code)->co_consts);
}

static PyObject *
code_names(PyObject *code)
{
    return Py_NewRef(((PyCodeObject *)code)->co_names);
}

static PyObject *
code_varnames(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyCode_GetVarnames((PyCodeObject *)code);
#else
    return Py_NewRef(((PyCodeObject *)code)->co_varnames);
#endif
}

static PyObject *
code_freevars(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyCode_GetFreevars((PyCodeObject *)code);
#else
    return Py_NewRef(((PyCodeObject *)code)->co_freevars);
#endif
}

static PyObject *
code_cellvars(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyCode_GetCellvars((PyCodeObject *)code);
#else
    return Py_NewRef(((PyCodeObject *)code)->co_cellvars);
#endif
}

/* A table argument of configure(): 256 bytes, or (tuple) a tuple of 256 items. */
static int
table_ok(PyObject *obj, int tuple, const char *what)
{
    int ok = tuple ? PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 256 : PyBytes_Check(obj) && PyBytes_GET_SIZE(obj) == 256;
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "configure(): %s must be %s", what, tuple ? "a tuple of 256 items" : "256 bytes");
        return -1;
    }
    return 0;
}

/* Everything is checked before anything is replaced: a bad call leaves the tables as they were. */
static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "configure() takes 16 arguments");
        return NULL;
    }
    if (!PyType_Check(args[15]) || !PyType_IsSubtype((PyTypeObject *)args[15], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure(): name_ref must be a tuple subclass");
        return NULL;
    }
    if (!PyBytes_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "configure(): tag must be bytes");
        return NULL;
    }
    if (!PyBytes_Check(args[8]) || PyBytes_GET_SIZE(args[8]) != 512) {
        PyErr_SetString(PyExc_TypeError, "configure(): pair_classes must be 512 bytes");
        return NULL;
    }
    if (table_ok(args[0], 0, "kinds") < 0 || table_ok(args[1], 0, "sizes") < 0 || table_ok(args[2], 0, "shifts") < 0 ||
        table_ok(args[3], 0, "ref_class") < 0 || table_ok(args[4], 1, "names") < 0 || table_ok(args[5], 1, "tokens") < 0 ||
        table_ok(args[6], 1, "pair_first") < 0 || table_ok(args[7], 1, "pair_second") < 0) {
        return NULL;
    }
    for (int op = 0; op < 256; op++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(args[5], op)) || !PyUnicode_Check(PyTuple_GET_ITEM(args[4], op))) {
            PyErr_SetString(PyExc_TypeError, "configure(): tokens must be bytes and names str");
            return NULL;
        }
        if (PyBytes_AS_STRING(args[1])[op] == 0) {
            PyErr_SetString(PyExc_ValueError, "configure(): an instruction occupies at least one code unit");
            return NULL;
        }
    }
    for (int op = 0; op < 256; op++) {
        if ((unsigned char)PyBytes_AS_STRING(args[2])[op] > 31) {
            PyErr_Format(PyExc_ValueError, "configure(): the name-flag shift of opcode %d is above 31", op);
            return NULL;
        }
    }
    long extended_arg = PyLong_AsLong(args[9]);
    long swap = extended_arg == -1 && PyErr_Occurred() ? -1 : PyLong_AsLong(args[10]);
    int localsplus = PyErr_Occurred() ? -1 : PyObject_IsTrue(args[11]);
    int normalizes_jumps = localsplus < 0 ? -1 : PyObject_IsTrue(args[12]);
    long flags_ignored = normalizes_jumps < 0 ? -1 : PyLong_AsLong(args[14]);
    if (normalizes_jumps < 0 || PyErr_Occurred()) {
        return NULL;
    }
    if (extended_arg < 0 || extended_arg > 255 || swap < -1 || swap > 255) {
        PyErr_SetString(PyExc_ValueError, "configure(): extended_arg must be an opcode (0-255), swap one or -1");
        return NULL;
    }
    if (T.scanning) {
        PyErr_SetString(PyExc_RuntimeError, "configure(): called while scan() runs (from its const_token)");
        return NULL;
    }
    memcpy(T.kinds, PyBytes_AS_STRING(args[0]), 256);
    memcpy(T.sizes, PyBytes_AS_STRING(args[1]), 256);
    memcpy(T.shifts, PyBytes_AS_STRING(args[2]), 256);
    memcpy(T.ref_class, PyBytes_AS_STRING(args[3]), 256);
    memcpy(T.pair_class, PyBytes_AS_STRING(args[8]), 512);
    Py_XSETREF(T.names, Py_NewRef(args[4]));
    Py_XSETREF(T.tokens, Py_NewRef(args[5]));
    Py_XSETREF(T.pair_first, Py_NewRef(args[6]));
    Py_XSETREF(T.pair_second, Py_NewRef(args[7]));
    T.extended_arg = (int)extended_arg;
    T.swap = (int)swap;
    T.localsplus = localsplus;
    T.normalizes_jumps = normalizes_jumps;
    Py_XSETREF(T.tag, Py_NewRef(args[13]));
    Py_XSETREF(T.name_ref, Py_NewRef(args[15]));
    T.flags_ignored = flags_ignored;
    T.ready = 1;
    Py_RETURN_NONE;
}

/* `lead` then the decimal digits of v (printf's %lld, without its cost: a token has several). */
static int
put_int(Buf *b, const char *lead, Py_ssize_t leadlen, long long v)
{
    char text[48];
    char *end = text + sizeof text, *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    return buf_put(b, lead, leadlen) < 0 ? -1 : buf_put(b, p, end - p);
}

/* `lead` + "s<len>:<utf-8, surrogates passed>": a str as canonical_const encodes it (the
 * length counts code points). */
static int
put_str_after(Buf *b, const char *lead, Py_ssize_t leadlen, PyObject *text)
{
    Py_ssize_t size;
    PyObject *encoded = NULL;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 == NULL) { /* lone surrogates: encoded as surrogatepass does */
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
        if (encoded == NULL) {
            return -1;
        }
        utf8 = PyBytes_AS_STRING(encoded);
        size = PyBytes_GET_SIZE(encoded);
    }
    int rc = buf_put(b, lead, leadlen) < 0 || put_int(b, "s", 1, (long long)PyUnicode_GET_LENGTH(text)) < 0 ||
                     buf_put(b, ":", 1) < 0 || buf_put(b, utf8, size) < 0
                 ? -1
                 : 0;
    Py_XDECREF(encoded);
    return rc;
}

/* A str argument of an instruction: " s<len>:<utf-8>". */
static int
put_str(Buf *b, PyObject *text)
{
    return put_str_after(b, " ", 1, text);
}

static int
put_bytes(Buf *b, PyObject *bytes)
{
    return buf_put(b, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* " " + canonical_const(value). */
static int
put_const(Buf *b, PyObject *value, PyObject *const_token)
{
    if (value == Py_None) {
        return buf_put(b, " None", 5);
    }
    if (value == Py_True) {
        return buf_put(b, " True", 5);
    }
    if (value == Py_False) {
        return buf_put(b, " False", 6);
    }
    if (value == Py_Ellipsis) {
        return buf_put(b, " Ellipsis", 9);
    }
    if (PyUnicode_CheckExact(value)) {
        return put_str(b, value);
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long small = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow && !(small == -1 && PyErr_Occurred())) {
            return put_int(b, " i", 2, small);
        }
        PyErr_Clear();
        PyObject *text = PyObject_Str(value);
        if (text == NULL) {
            return -1;
        }
        Py_ssize_t size;
        const char *digits = PyUnicode_AsUTF8AndSize(text, &size);
        int rc = digits == NULL || buf_put(b, " i", 2) < 0 || buf_put(b, digits, size) < 0 ? -1 : 0;
        Py_DECREF(text);
        return rc;
    }
    PyObject *encoded = PyObject_CallOneArg(const_token, value);
    if (encoded == NULL) {
        return -1;
    }
    if (!PyBytes_Check(encoded)) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_TypeError, "scan(): const_token must return bytes");
        return -1;
    }
    int rc = buf_put(b, " ", 1) < 0 || put_bytes(b, encoded) < 0 ? -1 : 0;
    Py_DECREF(encoded);
    return rc;
}

/* The name of fast-local index arg (3.11+: locals, cells, free variables). New reference,
 * or NULL with an exception set. */
static PyObject *
local_name(PyObject *code, PyObject *varnames, Py_ssize_t arg)
{
    if (arg < PyTuple_GET_SIZE(varnames)) {
        PyObject *name = PyTuple_GET_ITEM(varnames, arg);
        Py_INCREF(name);
        return name;
    }
    if (T.localsplus) {
        return PyObject_CallMethod(code, "_varname_from_oparg", "n", arg);
    }
    PyErr_SetString(PyExc_IndexError, "local index out of range");
    return NULL;
}

/* 3.10: index into co_cellvars + co_freevars. */
static PyObject *
cell_name(PyObject *code, PyObject **cells, Py_ssize_t arg)
{
    if (*cells == NULL) {
        PyObject *cellvars = code_cellvars(code);
        PyObject *freevars = cellvars ? code_freevars(code) : NULL;
        *cells = freevars ? PySequence_Concat(cellvars, freevars) : NULL;
        Py_XDECREF(cellvars);
        Py_XDECREF(freevars);
        if (*cells == NULL) {
            return NULL;
        }
    }
    if (arg >= PyTuple_GET_SIZE(*cells)) {
        PyErr_SetString(PyExc_IndexError, "cell index out of range");
        return NULL;
    }
    PyObject *name = PyTuple_GET_ITEM(*cells, arg);
    Py_INCREF(name);
    return name;
}

/* The str name of a variable argument (a local; or, 3.10, a cell or free variable), or NULL
 * with no exception set when it is not one this loop decodes (the Python loop then does). */
static PyObject *
variable_name(PyObject *code, PyObject *varnames, PyObject **cells, int local, Py_ssize_t arg)
{
    PyObject *value = local ? local_name(code, varnames, arg) : cell_name(code, cells, arg);
    if (value == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_CheckExact(value)) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* The references, built as flydeps.code.bytecode.refs_from builds them from the instructions
 * it is given (here: the reference-reading ones, in order; gaps in positions end chains). */
typedef struct {
    PyObject *refs;        /* dict: (scope, name, attrs, level) -> None, first use first */
    PyObject *freevars;    /* code.co_freevars, read on the first LOAD_DEREF */
    PyObject *base_scope;  /* borrowed interned scope string, or NULL: no chain open */
    PyObject *base_name;   /* owned */
    PyObject *attrs;       /* list of str */
    PyObject *const_prev;  /* the constant pushed before the last one (owned), for IMPORT_NAME's level */
    PyObject *const_last;
    Py_ssize_t nconsts, previous;
    PyObject *import_name; /* the last new import reference's name and level (owned) */
    PyObject *import_level;
} Refs;

static PyObject *S_GLOBAL, *S_LOCAL, *S_FREE, *S_IMPORT, *S_ANNOTATIONS, *EMPTY, *ZERO;

static void
refs_consts_clear(Refs *r)
{
    Py_CLEAR(r->const_prev);
    Py_CLEAR(r->const_last);
    r->nconsts = 0;
}

/* refs.setdefault((scope, name, attrs, level)); on a new import reference, remember it. */
static int
refs_add(Refs *r, PyObject *scope, PyObject *name, PyObject *attrs, PyObject *level)
{
    PyObject *key = PyTuple_Pack(4, scope, name, attrs, level);
    if (key == NULL) {
        return -1;
    }
    int present = PyDict_Contains(r->refs, key);
    int rc = present < 0 ? -1 : present ? 0 : PyDict_SetItem(r->refs, key, Py_None);
    Py_DECREF(key);
    if (rc == 0 && !present && scope == S_IMPORT) {
        Py_INCREF(name);
        Py_XSETREF(r->import_name, name);
        Py_INCREF(level);
        Py_XSETREF(r->import_level, level);
    }
    return rc;
}

static int
refs_flush(Refs *r)
{
    if (r->base_scope == NULL) {
        return 0;
    }
    PyObject *attrs = PyList_AsTuple(r->attrs);
    int rc = attrs ? refs_add(r, r->base_scope, r->base_name, attrs, ZERO) : -1;
    Py_XDECREF(attrs);
    r->base_scope = NULL;
    Py_CLEAR(r->base_name);
    if (PyList_SetSlice(r->attrs, 0, PyList_GET_SIZE(r->attrs), NULL) < 0) {
        return -1;
    }
    return rc;
}

static PyObject *
as_str(PyObject *value)
{
    if (PyUnicode_CheckExact(value)) {
        Py_INCREF(value);
        return value;
    }
    return PyObject_Str(value);
}

/* One reference-reading instruction at `position` of class `cls` with argument `value`. */
static int
refs_step(Refs *r, PyObject *code, Py_ssize_t position, int cls, PyObject *value)
{
    int adjacent = position == r->previous + 1;
    r->previous = position;
    if (!adjacent) {
        refs_consts_clear(r);
    }
    if (r->base_scope != NULL) {
        if (adjacent && cls == R_ATTR) {
            PyObject *text = as_str(value);
            int rc = text ? PyList_Append(r->attrs, text) : -1;
            Py_XDECREF(text);
            return rc;
        }
        if (refs_flush(r) < 0) {
            return -1;
        }
    }
    if (cls == R_GLOBAL || (cls == R_NAME && PyUnicode_Compare(value, S_ANNOTATIONS) != 0)) {
        if (PyErr_Occurred()) {
            return -1;
        }
        r->base_scope = S_GLOBAL;
        r->base_name = as_str(value);
        if (r->base_name == NULL) {
            return -1;
        }
    }
    else if (cls == R_LOCAL) {
        r->base_scope = S_LOCAL;
        r->base_name = as_str(value);
        if (r->base_name == NULL) {
            return -1;
        }
    }
    else if (cls == R_DEREF) {
        if (r->freevars == NULL) {
            r->freevars = code_freevars(code);
            if (r->freevars == NULL) {
                return -1;
            }
        }
        int found = PySequence_Contains(r->freevars, value);
        if (found < 0) {
            return -1;
        }
        if (found) {
            r->base_scope = S_FREE;
            r->base_name = as_str(value);
            if (r->base_name == NULL) {
                return -1;
            }
        }
    }
    else if (cls == R_IMPORT_NAME) {
        PyObject *level = r->nconsts >= 2 && PyLong_CheckExact(r->const_prev) ? r->const_prev : ZERO;
        PyObject *name = as_str(value);
        int rc = name ? refs_add(r, S_IMPORT, name, EMPTY, level) : -1;
        Py_XDECREF(name);
        if (rc < 0) {
            return -1;
        }
    }
    else if (cls == R_IMPORT_FROM && r->import_name != NULL) {
        PyObject *name = as_str(value);
        PyObject *attrs = name ? PyTuple_Pack(1, name) : NULL;
        PyObject *module = r->import_name, *level = r->import_level;
        Py_INCREF(module);
        Py_INCREF(level);
        int rc = attrs ? refs_add(r, S_IMPORT, module, attrs, level) : -1;
        Py_DECREF(module);
        Py_DECREF(level);
        Py_XDECREF(name);
        Py_XDECREF(attrs);
        if (rc < 0) {
            return -1;
        }
    }
    if (cls == R_CONST) {
        Py_INCREF(value);
        Py_XSETREF(r->const_prev, r->const_last);
        r->const_last = value;
        r->nconsts++;
    }
    else if (r->nconsts) {
        refs_consts_clear(r);
    }
    return 0;
}

/* The references as a tuple of NameRef, first use first. */
static PyObject *
refs_finish(Refs *r)
{
    if (refs_flush(r) < 0) {
        return NULL;
    }
    PyObject *out = PyTuple_New(PyDict_GET_SIZE(r->refs));
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (PyDict_Next(r->refs, &pos, &key, &value)) {
        PyObject *args = PyTuple_Pack(1, key);
        PyObject *ref = args ? PyTuple_Type.tp_new((PyTypeObject *)T.name_ref, args, NULL) : NULL;
        Py_XDECREF(args);
        if (ref == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k++, ref);
    }
    return out;
}

static void
refs_free(Refs *r)
{
    Py_XDECREF(r->refs);
    Py_XDECREF(r->freevars);
    Py_XDECREF(r->base_name);
    Py_XDECREF(r->attrs);
    Py_XDECREF(r->const_prev);
    Py_XDECREF(r->const_last);
    Py_XDECREF(r->import_name);
    Py_XDECREF(r->import_level);
}

/* canonical_const of a tuple of str: "(" + ",".join("s<len>:<utf-8>") + ")". */
static int
put_names(Buf *b, PyObject *names)
{
    if (!PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "scan(): a code name table is not a tuple");
        return -1;
    }
    if (buf_put(b, "(", 1) < 0) {
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "scan(): a code name is not a str");
            return -1;
        }
        if (put_str_after(b, ",", k ? 1 : 0, name) < 0) {
            return -1;
        }
    }
    return buf_put(b, ")", 1);
}

/* The digest's first bytes (_codescan.header): tag + canonical_const((argcount,
 * posonlyargcount, kwonlyargcount, flags, varnames, freevars, cellvars)). */
static int
put_header(Buf *b, PyObject *code, PyObject *varnames)
{
    PyCodeObject *co = (PyCodeObject *)code;
    PyObject *freevars = code_freevars(code);
    PyObject *cellvars = freevars ? code_cellvars(code) : NULL;
    int rc = cellvars == NULL || put_bytes(b, T.tag) < 0 || put_int(b, "(i", 2, co->co_argcount) < 0 ||
                     put_int(b, ",i", 2, co->co_posonlyargcount) < 0 ||
                     put_int(b, ",i", 2, co->co_kwonlyargcount) < 0 ||
                     put_int(b, ",i", 2, (long long)(co->co_flags & ~T.flags_ignored)) < 0 || buf_put(b, ",", 1) < 0 ||
                     put_names(b, varnames) < 0 || buf_put(b, ",", 1) < 0 || put_names(b, freevars) < 0 ||
                     buf_put(b, ",", 1) < 0 || put_names(b, cellvars) < 0 || buf_put(b, ")", 1) < 0
                 ? -1
                 : 0;
    Py_XDECREF(freevars);
    Py_XDECREF(cellvars);
    return rc;
}

typedef struct {
    Py_ssize_t *units;  /* code unit per instruction (negative: second half of a pair) */
    Py_ssize_t *starts; /* where each instruction's token starts in `text` (one more: the end) */
    Py_ssize_t count, cap;
    Buf text;           /* the tokens, one after the other */
    Py_ssize_t *jump_pos, *jump_unit;
    Py_ssize_t njumps, jcap;
} Scan;

static void
scan_free(Scan *s)
{
    PyMem_Free(s->units);
    PyMem_Free(s->starts);
    buf_free(&s->text);
    PyMem_Free(s->jump_pos);
    PyMem_Free(s->jump_unit);
}

/* Grows two parallel arrays to hold more than `used` + 1 entries (doubling `*cap`). */
static int
grow_pair(Py_ssize_t **a, Py_ssize_t **b, Py_ssize_t *cap, Py_ssize_t used, Py_ssize_t first)
{
    if (used + 1 < *cap) {
        return 0;
    }
    Py_ssize_t size = *cap ? *cap * 2 : first;
    Py_ssize_t *na = PyMem_Realloc(*a, (size_t)size * sizeof(Py_ssize_t));
    if (na == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *a = na;
    Py_ssize_t *nb = PyMem_Realloc(*b, (size_t)size * sizeof(Py_ssize_t));
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *b = nb;
    *cap = size;
    return 0;
}

/* Opens instruction s->count at code unit `unit`: its token follows in s->text. */
static int
scan_open(Scan *s, Py_ssize_t unit)
{
    if (grow_pair(&s->units, &s->starts, &s->cap, s->count, 64) < 0) {
        return -1;
    }
    s->units[s->count] = unit;
    s->starts[s->count] = s->text.len;
    s->count++;
    s->starts[s->count] = -1;
    return 0;
}

/* Closes the instruction list: the end of the last token. */
static void
scan_close(Scan *s)
{
    if (s->starts != NULL) {
        s->starts[s->count] = s->text.len;
    }
}

static int
scan_jump(Scan *s, Py_ssize_t unit_target)
{
    if (grow_pair(&s->jump_pos, &s->jump_unit, &s->jcap, s->njumps, 16) < 0) {
        return -1;
    }
    s->jump_pos[s->njumps] = s->count; /* the jump's own position: opened next */
    s->jump_unit[s->njumps] = unit_target;
    s->njumps++;
    return 0;
}

/* Instruction index of code unit `unit`, rounding forward over skipped filler; `count`
 * past the last instruction (target_index in code/scan.py). */
static Py_ssize_t
target_index(const Py_ssize_t *position, Py_ssize_t size, Py_ssize_t count, Py_ssize_t unit)
{
    if (unit < 0) {
        return count; /* never produced by CPython; the Python side finds no such key either */
    }
    for (; unit < size; unit++) {
        if (position[unit] >= 0) {
            return position[unit];
        }
    }
    return count;
}

static int
put_format(Buf *b, const char *fmt, Py_ssize_t a, Py_ssize_t c, Py_ssize_t d, Py_ssize_t e, Py_ssize_t f)
{
    char text[128];
    int n = snprintf(text, sizeof text, fmt, a, c, d, e, f);
    return buf_put(b, text, n);
}

/* The exception-table field at *pos (6 bits a byte, bit 6: more follow), or -1 where the
 * table is cut or the field is wider than ARG_MAX (malformed: _codescan._varint raises). */
static Py_ssize_t
read_varint(const unsigned char *t, Py_ssize_t n, Py_ssize_t *pos)
{
    uint64_t value = 0;
    unsigned char byte;
    do {
        if (*pos >= n) {
            return -1;
        }
        byte = t[(*pos)++];
        value = (value << 6) | (byte & 63);
        if (value > ARG_MAX) {
            return -1;
        }
    } while (byte & 64);
    return (Py_ssize_t)value;
}

/* The stream after the header: tokens, " ->N" after each jump, the exception table. NULL
 * with no exception set and *malformed = 1 where the exception table is malformed. */
static PyObject *
assemble(Scan *s, Py_ssize_t size, PyObject *exctable, PyObject *code, PyObject *varnames, int *malformed)
{
    PyObject *result = NULL;
    Buf b = CEXT_BUF_INIT;
    if (put_header(&b, code, varnames) < 0) {
        buf_free(&b);
        return NULL;
    }
    Py_ssize_t *position = PyMem_Malloc((size_t)(size + 1) * sizeof(Py_ssize_t));
    if (position == NULL) {
        buf_free(&b);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t u = 0; u <= size; u++) {
        position[u] = -1;
    }
    for (Py_ssize_t p = 0; p < s->count; p++) {
        if (s->units[p] >= 0 && s->units[p] < size) {
            position[s->units[p]] = p;
        }
    }
    Py_ssize_t j = 0;
    for (Py_ssize_t p = 0; p < s->count; p++) {
        if (buf_put(&b, s->text.data + s->starts[p], s->starts[p + 1] - s->starts[p]) < 0) {
            goto done;
        }
        if (j < s->njumps && s->jump_pos[j] == p) {
            Py_ssize_t target = target_index(position, size, s->count, s->jump_unit[j]);
            if (put_int(&b, " ->", 3, (long long)target) < 0) {
                goto done;
            }
            j++;
        }
    }
    if (exctable != NULL && PyBytes_Check(exctable)) {
        const unsigned char *t = (const unsigned char *)PyBytes_AS_STRING(exctable);
        Py_ssize_t n = PyBytes_GET_SIZE(exctable), pos = 0;
        while (pos < n) {
            Py_ssize_t fields[4];
            for (int k = 0; k < 4; k++) {
                fields[k] = read_varint(t, n, &pos);
                if (fields[k] < 0) {
                    *malformed = 1;
                    goto done;
                }
            }
            Py_ssize_t start = fields[0], end = fields[0] + fields[1], handler = fields[2];
            if (put_format(&b, "\nexc %zd %zd %zd %zd %zd", target_index(position, size, s->count, start),
                           target_index(position, size, s->count, end),
                           target_index(position, size, s->count, handler), fields[3] >> 1, fields[3] & 1) < 0) {
                goto done;
            }
        }
    }
    result = PyBytes_FromStringAndSize(b.data ? b.data : "", b.len);
done:
    PyMem_Free(position);
    buf_free(&b);
    return result;
}

static PyObject *
scan_result_lists(Scan *s, PyObject *refs, int has_swap)
{
    PyObject *units = PyList_New(s->count), *tokens = PyList_New(s->count), *jumps = PyDict_New();
    PyObject *result = NULL;
    if (units == NULL || tokens == NULL || jumps == NULL) {
        goto done;
    }
    for (Py_ssize_t p = 0; p < s->count; p++) {
        PyObject *unit = PyLong_FromSsize_t(s->units[p]);
        if (unit == NULL) {
            goto done;
        }
        PyList_SET_ITEM(units, p, unit);
        PyObject *token = PyBytes_FromStringAndSize(s->text.data + s->starts[p], s->starts[p + 1] - s->starts[p]);
        if (token == NULL) {
            goto done;
        }
        PyList_SET_ITEM(tokens, p, token);
    }
    for (Py_ssize_t j = 0; j < s->njumps; j++) {
        PyObject *key = PyLong_FromSsize_t(s->jump_pos[j]);
        PyObject *value = key ? PyLong_FromSsize_t(s->jump_unit[j]) : NULL;
        int rc = value ? PyDict_SetItem(jumps, key, value) : -1;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) {
            goto done;
        }
    }
    result = Py_BuildValue("(OOOOO)", units, tokens, jumps, refs, has_swap ? Py_True : Py_False);
done:
    Py_XDECREF(units);
    Py_XDECREF(tokens);
    Py_XDECREF(jumps);
    return result;
}

static PyObject *
scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "scan(code, raw, const_token) takes 3 arguments");
        return NULL;
    }
    if (!T.ready) {
        PyErr_SetString(PyExc_RuntimeError, "scan(): configure() was not called");
        return NULL;
    }
    PyObject *code = args[0], *raw = args[1], *const_token = args[2];
    if (!PyCode_Check(code) || !PyBytes_Check(raw)) {
        PyErr_SetString(PyExc_TypeError, "scan(code, raw, const_token) needs a code object and its co_code");
        return NULL;
    }
    PyObject *consts = NULL, *names = NULL, *varnames = NULL, *cells = NULL, *refs = NULL, *result = NULL;
    PyObject *exctable = NULL;
    T.scanning++; /* the tables stay as they are until this call returns */
    Scan s;
    memset(&s, 0, sizeof s);
    Refs r;
    memset(&r, 0, sizeof r);
    r.previous = -2;
    consts = code_consts(code);
    names = code_names(code);
    varnames = code_varnames(code);
    r.refs = varnames ? PyDict_New() : NULL;
    r.attrs = r.refs ? PyList_New(0) : NULL;
    if (r.attrs == NULL) {
        goto done;
    }
    if (!PyTuple_Check(consts) || !PyTuple_Check(names) || !PyTuple_Check(varnames)) {
        PyErr_SetString(PyExc_TypeError, "scan(): code tables are not tuples");
        goto done;
    }
    const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t size = PyBytes_GET_SIZE(raw) / 2; /* code units */
    if (PyBytes_GET_SIZE(raw) % 2) {
        goto unsupported; /* a cut instruction: the Python loop raises MalformedCodeError */
    }
    int has_swap = 0;
    if (T.swap >= 0) {
        for (Py_ssize_t i = 0; i < size; i++) {
            if (bytes[2 * i] == T.swap) {
                has_swap = 1;
                break;
            }
        }
    }
    unsigned long ext = 0;
    Py_ssize_t i = 0;
    while (i < size) {
        int op = bytes[2 * i];
        int kind = T.kinds[op];
        if (kind == K_FILLER) {
            ext = op == T.extended_arg ? (ext | bytes[2 * i + 1]) << 8 : 0;
            if (ext > (ARG_MAX & ~0xFFUL)) {
                goto unsupported; /* wider than the interpreter's argument: malformed */
            }
            i += 1;
            continue;
        }
        unsigned long arg = ext | bytes[2 * i + 1];
        ext = 0;
        PyObject *opening = PyTuple_GET_ITEM(T.tokens, op);
        Py_ssize_t after = i + T.sizes[op];
        if (kind >= K_CONST && kind <= K_FREE) {
            PyObject *value;
            int shift = 0;
            if (kind == K_CONST) {
                if ((Py_ssize_t)arg >= PyTuple_GET_SIZE(consts)) {
                    goto unsupported;
                }
                value = PyTuple_GET_ITEM(consts, arg);
                Py_INCREF(value);
            }
            else if (kind == K_NAME) {
                shift = T.shifts[op];
                Py_ssize_t index = (Py_ssize_t)(arg >> shift);
                if (index >= PyTuple_GET_SIZE(names) || !PyUnicode_CheckExact(PyTuple_GET_ITEM(names, index))) {
                    goto unsupported;
                }
                value = PyTuple_GET_ITEM(names, index);
                Py_INCREF(value);
            }
            else {
                value = variable_name(code, varnames, &cells, kind == K_LOCAL || T.localsplus, (Py_ssize_t)arg);
                if (value == NULL) {
                    goto unsupported;
                }
            }
            int rc = T.ref_class[op] ? refs_step(&r, code, s.count, T.ref_class[op], value) : 0;
            if (rc == 0) {
                rc = scan_open(&s, i) < 0 || put_bytes(&s.text, opening) < 0 ? -1 : 0;
            }
            if (rc == 0) {
                rc = kind == K_CONST ? put_const(&s.text, value, const_token) : put_str(&s.text, value);
            }
            if (rc == 0 && shift) {
                rc = put_int(&s.text, "/", 1, (long long)(arg & ((1UL << shift) - 1)));
            }
            Py_DECREF(value);
            if (rc < 0) {
                goto done;
            }
        }
        else if (kind == K_NONE) {
            if (scan_open(&s, i) < 0 || put_bytes(&s.text, opening) < 0) {
                goto done;
            }
        }
        else if (kind == K_RAW) {
            if (scan_open(&s, i) < 0 || put_bytes(&s.text, opening) < 0 || put_int(&s.text, " ", 1, (long long)arg) < 0) {
                goto done;
            }
        }
        else if (kind == K_PAIR) {
            PyObject *halves[2] = {PyTuple_GET_ITEM(T.pair_first, op), PyTuple_GET_ITEM(T.pair_second, op)};
            Py_ssize_t indices[2] = {(Py_ssize_t)(arg >> 4), (Py_ssize_t)(arg & 15)};
            for (int h = 0; h < 2; h++) {
                if (!PyUnicode_Check(halves[h])) {
                    goto unsupported;
                }
                PyObject *value = variable_name(code, varnames, &cells, 1, indices[h]);
                if (value == NULL) {
                    goto unsupported;
                }
                Py_ssize_t nlen;
                const char *hname = PyUnicode_AsUTF8AndSize(halves[h], &nlen);
                int rc = hname == NULL ? -1 : refs_step(&r, code, s.count, T.pair_class[h * 256 + op], value);
                if (rc == 0) {
                    rc = scan_open(&s, h == 0 ? i : -s.count) < 0 || buf_put(&s.text, "\n", 1) < 0 ||
                                 buf_put(&s.text, hname, nlen) < 0 || put_str(&s.text, value) < 0
                             ? -1
                             : 0;
                }
                Py_DECREF(value);
                if (rc < 0) {
                    goto done;
                }
            }
            i = after;
            continue;
        }
        else if (kind == K_JFWD || kind == K_JBACK || kind == K_JABS) {
            Py_ssize_t target = kind == K_JABS    ? (Py_ssize_t)arg
                                : kind == K_JFWD ? after + (Py_ssize_t)arg
                                                 : after - (Py_ssize_t)arg;
            if (target < 0 || target > size) {
                goto unsupported; /* outside the code: malformed */
            }
            if (scan_jump(&s, target) < 0 || scan_open(&s, i) < 0 || put_bytes(&s.text, opening) < 0) {
                goto done;
            }
        }
        else {
            goto unsupported;
        }
        i = after;
    }
    if (i > size) {
        goto unsupported; /* the last instruction's inline caches are cut: malformed */
    }
    scan_close(&s);
    refs = refs_finish(&r);
    if (refs == NULL) {
        goto done;
    }
    if (has_swap || (T.normalizes_jumps && s.njumps > 0)) {
        result = scan_result_lists(&s, refs, has_swap);
        goto done;
    }
#if PY_VERSION_HEX >= 0x030B0000
    exctable = Py_NewRef(((PyCodeObject *)code)->co_exceptiontable);
#endif
    int malformed = 0;
    PyObject *stream = assemble(&s, size, exctable, code, varnames, &malformed);
    if (stream != NULL) {
        result = PyTuple_Pack(2, stream, refs);
        Py_DECREF(stream);
    }
    else if (malformed) {
        goto unsupported;
    }
    goto done;
unsupported:
    result = Py_NewRef(Py_None);
done:
    scan_free(&s);
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(varnames);
    Py_XDECREF(cells);
    Py_XDECREF(refs);
    refs_free(&r);
    Py_XDECREF(exctable);
    T.scanning--;
    return result;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(kinds, sizes, shifts, ref_class, names, tokens, pair_first, pair_second, pair_classes, "
     "extended_arg, swap, localsplus, normalizes_jumps): this interpreter's opcode tables"},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(code, raw, const_token) -> (stream, refs) | (units, tokens, jumps, refs, has_swap) | None"},
    {NULL, NULL, 0, NULL},
};

static int
prepare(void)
{
    static const CextName names[] = {
        {&S_GLOBAL, "global"}, {&S_LOCAL, "local"}, {&S_FREE, "free"}, {&S_IMPORT, "import"},
        {&S_ANNOTATIONS, "__annotations__"},
    };
    if (CEXT_INTERN_ALL(names) < 0 || (EMPTY == NULL && (EMPTY = PyTuple_New(0)) == NULL) ||
        (ZERO == NULL && (ZERO = PyLong_FromLong(0)) == NULL)) {
        return -1;
    }
    return 0;
}

CEXT_MODULE(_scanext, "flydeps.code._scanext", "The direct co_code decoder's inner loop (flydeps.code.scan).", methods,
            prepare, NULL)
