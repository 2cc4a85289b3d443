/* darwin_memo._cpack: the SQLite store's token lists (packs), edited in C (optional;
 * darwin_memo.backends.sqlstore does the same in Python).
 *
 * drop_ids(pack: bytes, gone: bytes) -> bytes
 *
 * ``pack`` is a token's list of rowids: unsigned 32-bit integers, little-endian, as
 * sqlstore.pack_ids writes them. ``gone`` is a bitmap over rowids: rowid r is gone
 * when bit ``r & 7`` of byte ``r >> 3`` is set (rowids past its end are not). Returns
 * the pack without the gone rowids, in the same order; the very object passed when
 * none of its rowids is gone. A burial of half a million rows touches the packs of
 * most tokens: in Python this is a set lookup per rowid of every such pack.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t
read_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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
    const unsigned char *in = (const unsigned char *)PyBytes_AS_STRING(pack);
    Py_ssize_t size = PyBytes_GET_SIZE(pack);
    PyObject *out = NULL;
    if (size % 4) {
        PyErr_SetString(PyExc_ValueError, "a pack's length is a multiple of 4");
        goto done;
    }
    const unsigned char *bits = (const unsigned char *)gone.buf;
    Py_ssize_t first = 0; /* the first gone rowid's offset */
    while (first < size && !is_gone(bits, gone.len, read_le32(in + first)))
        first += 4;
    if (first == size) {
        Py_INCREF(pack);
        out = pack;
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, size - 4);
    if (out == NULL)
        goto done;
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(to, in, (size_t)first);
    Py_ssize_t kept = first;
    for (Py_ssize_t at = first + 4; at < size; at += 4) {
        if (!is_gone(bits, gone.len, read_le32(in + at))) {
            memcpy(to + kept, in + at, 4);
            kept += 4;
        }
    }
    if (kept < size - 4 && _PyBytes_Resize(&out, kept) < 0)
        out = NULL;
done:
    PyBuffer_Release(&gone);
    return out;
}

static PyMethodDef methods[] = {
    {"drop_ids", drop_ids, METH_VARARGS,
     "drop_ids(pack, gone) -> bytes\n\n"
     "A pack (little-endian unsigned 32-bit rowids) without the rowids whose bit is set\n"
     "in the bitmap gone (bit r & 7 of byte r >> 3); the pack itself when none is."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_cpack",
    .m_doc = "The SQLite store's token lists, edited in C (see darwin_memo.backends.sqlstore).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cpack(void)
{
    return PyModule_Create(&module);
}
