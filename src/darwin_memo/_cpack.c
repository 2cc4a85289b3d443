/* darwin_memo._cpack: the SQLite store's token lists (packs), coded and edited in C
 * (optional; darwin_memo.backends.sqlstore does the same in Python).
 *
 * A pack (schema 13) is a token's sorted, distinct rowids as unsigned LEB128 varints:
 * the first rowid, then each next one's distance from the one before, less one. Every
 * string of whole varints is a pack of increasing rowids; a pack is torn when its last
 * varint is cut short or a value does not fit 32 bits.
 *
 * encode_ids(ids: buffer of native uint32) -> bytes       (ids strictly increasing)
 * decode_ids(pack: bytes) -> bytes                          (native uint32, for array)
 * drop_ids(pack: bytes, gone: bytes) -> bytes
 *
 * ``gone`` is a bitmap over rowids: rowid r is gone when bit ``r & 7`` of byte
 * ``r >> 3`` is set (rowids past its end are not). drop_ids returns the pack without
 * the gone rowids; the very object passed when none of its rowids is gone. A burial of
 * half a million rows touches the packs of most tokens: in Python this is a set lookup
 * per rowid of every such pack.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_VARINT 5 /* bytes of a 32-bit value */

static const char TORN[] = "a token's pack is torn (a varint cut short or past 32 bits)";

/* The varint at in[*at]; -1 (ValueError set) when torn. */
static inline int
read_varint(const unsigned char *in, Py_ssize_t size, Py_ssize_t *at, uint32_t *out)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 7 * MAX_VARINT; shift += 7) {
        if (*at >= size)
            break;
        unsigned char byte = in[(*at)++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            if (value > UINT32_MAX)
                break;
            *out = (uint32_t)value;
            return 0;
        }
    }
    PyErr_SetString(PyExc_ValueError, TORN);
    return -1;
}

static inline Py_ssize_t
write_varint(unsigned char *to, uint64_t value)
{
    Py_ssize_t n = 0;
    while (value >= 0x80) {
        to[n++] = (unsigned char)(value & 0x7F) | 0x80;
        value >>= 7;
    }
    to[n++] = (unsigned char)value;
    return n;
}

/* One rowid after another: the first as itself, the rest as the gap less one. */
typedef struct {
    unsigned char *to;
    Py_ssize_t len;
    int started;
    uint32_t last;
} Writer;

static inline void
put(Writer *w, uint32_t rowid)
{
    uint64_t value = w->started ? (uint64_t)rowid - w->last - 1 : rowid;
    w->len += write_varint(w->to + w->len, value);
    w->started = 1;
    w->last = rowid;
}

typedef struct {
    const unsigned char *in;
    Py_ssize_t size;
    Py_ssize_t at;
    int started;
    uint64_t last;
} Reader;

/* 1 and the next rowid in *out, 0 at the end, -1 (ValueError set) when torn. */
static inline int
next_id(Reader *r, uint32_t *out)
{
    if (r->at >= r->size)
        return 0;
    uint32_t value;
    if (read_varint(r->in, r->size, &r->at, &value) < 0)
        return -1;
    uint64_t rowid = r->started ? r->last + 1 + value : value;
    if (rowid > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, TORN);
        return -1;
    }
    r->started = 1;
    r->last = rowid;
    *out = (uint32_t)rowid;
    return 1;
}

static PyObject *
encode_ids(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer ids;
    if (!PyArg_ParseTuple(args, "y*:encode_ids", &ids))
        return NULL;
    PyObject *out = NULL;
    if (ids.len % 4) {
        PyErr_SetString(PyExc_ValueError, "ids are unsigned 32-bit integers (4 bytes each)");
        goto done;
    }
    Py_ssize_t count = ids.len / 4;
    out = PyBytes_FromStringAndSize(NULL, count * MAX_VARINT);
    if (out == NULL)
        goto done;
    Writer w = {(unsigned char *)PyBytes_AS_STRING(out), 0, 0, 0};
    const unsigned char *in = (const unsigned char *)ids.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t rowid;
        memcpy(&rowid, in + 4 * i, 4);
        if (w.started && rowid <= w.last) {
            PyErr_SetString(PyExc_ValueError, "a pack's rowids must be strictly increasing");
            Py_CLEAR(out);
            goto done;
        }
        put(&w, rowid);
    }
    if (w.len < count * MAX_VARINT && _PyBytes_Resize(&out, w.len) < 0)
        out = NULL;
done:
    PyBuffer_Release(&ids);
    return out;
}

static PyObject *
decode_ids(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *pack;
    if (!PyArg_ParseTuple(args, "S:decode_ids", &pack))
        return NULL;
    Reader r = {(const unsigned char *)PyBytes_AS_STRING(pack), PyBytes_GET_SIZE(pack), 0, 0, 0};
    /* A varint ends at each byte under 0x80: that many rowids. */
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < r.size; i++)
        count += r.in[i] < 0x80;
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * 4);
    if (out == NULL)
        return NULL;
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t n = 0;
    uint32_t rowid;
    int got;
    while ((got = next_id(&r, &rowid)) > 0) {
        if (n == count) { /* cannot happen: each varint ends at a byte under 0x80 */
            PyErr_SetString(PyExc_ValueError, TORN);
            got = -1;
            break;
        }
        memcpy(to + 4 * n++, &rowid, 4);
    }
    if (got < 0 || n != count) {
        if (got >= 0)
            PyErr_SetString(PyExc_ValueError, TORN);
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static inline int
is_gone(const unsigned char *bits, Py_ssize_t nbits, uint32_t rowid)
{
    size_t byte = rowid >> 3;
    return byte < (size_t)nbits && (bits[byte] >> (rowid & 7)) & 1;
}

static PyObject *
drop_ids(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *pack;
    Py_buffer gone;
    if (!PyArg_ParseTuple(args, "Sy*:drop_ids", &pack, &gone))
        return NULL;
    const unsigned char *bits = (const unsigned char *)gone.buf;
    Reader r = {(const unsigned char *)PyBytes_AS_STRING(pack), PyBytes_GET_SIZE(pack), 0, 0, 0};
    PyObject *out = NULL;
    uint32_t rowid;
    int got;
    /* Whether any rowid is gone (reading the whole pack: a torn one is refused). */
    int any = 0;
    while ((got = next_id(&r, &rowid)) > 0)
        any |= is_gone(bits, gone.len, rowid);
    if (got < 0)
        goto done;
    if (!any) {
        Py_INCREF(pack);
        out = pack;
        goto done;
    }
    /* Dropping a rowid joins two gaps into one no longer than both: the pack shrinks. */
    out = PyBytes_FromStringAndSize(NULL, r.size);
    if (out == NULL)
        goto done;
    Writer w = {(unsigned char *)PyBytes_AS_STRING(out), 0, 0, 0};
    r.at = 0;
    r.started = 0;
    while (next_id(&r, &rowid) > 0) {
        if (!is_gone(bits, gone.len, rowid))
            put(&w, rowid);
    }
    if (w.len < r.size && _PyBytes_Resize(&out, w.len) < 0)
        out = NULL;
done:
    PyBuffer_Release(&gone);
    return out;
}

static PyMethodDef methods[] = {
    {"encode_ids", encode_ids, METH_VARARGS,
     "encode_ids(ids) -> bytes\n\n"
     "The pack of ids (a buffer of native unsigned 32-bit integers, strictly increasing)."},
    {"decode_ids", decode_ids, METH_VARARGS,
     "decode_ids(pack) -> bytes\n\n"
     "A pack's rowids as native unsigned 32-bit integers (for array('I').frombytes);\n"
     "ValueError when the pack is torn."},
    {"drop_ids", drop_ids, METH_VARARGS,
     "drop_ids(pack, gone) -> bytes\n\n"
     "A pack without the rowids whose bit is set in the bitmap gone (bit r & 7 of\n"
     "byte r >> 3); the pack itself when none is."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_cpack",
    .m_doc = "The SQLite store's token lists, coded and edited in C "
             "(see darwin_memo.backends.sqlstore).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cpack(void)
{
    return PyModule_Create(&module);
}
