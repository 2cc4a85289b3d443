/* A store file's plain entries, made in C (see darwin_memo.store.MemoryStore.from_payload).
 *
 * A JSON store is mostly entries in the one shape ``MemoryEntry.to_dict`` writes for a
 * lesson with no lifecycle fields: eleven keys in a fixed order, each value of one JSON
 * type. ``types.read_entry`` recognises that shape in Python (two tuple comparisons and
 * a few checks, about 1.5 us an entry); here the same checks are a few pointer
 * comparisons. Anything else stops the run, and the caller reads that record in Python,
 * so every record outside the shape, and every error message, stays Python's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

/* The positions in types._WRITTEN_KEYS (the caller checks the order once). */
enum { QUESTION, ANSWER, KIND, SOURCES, ENERGY, BORN, STAMP, LAST, USES, LINEAGE, IDENT, NKEYS };

static int
all_str(PyObject *list)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_Check(PyList_GET_ITEM(list, i)))
            return 0;
    return 1;
}

/* The record's values in key order if it has the plain shape; 0 if not, -1 on error. */
static int
plain_values(PyObject *d, PyObject *keys, PyObject *types, PyObject *kinds, PyObject **v,
             PyObject **member)
{
    if (!PyDict_CheckExact(d) || PyDict_GET_SIZE(d) != NKEYS)
        return 0;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        PyObject *want = PyTuple_GET_ITEM(keys, i);
        if (key != want) {
            int same = PyUnicode_CheckExact(key) ? PyUnicode_Compare(key, want) : 1;
            if (same == -1 && PyErr_Occurred())
                return -1;
            if (same != 0)
                return 0;
        }
        if ((PyObject *)Py_TYPE(value) != PyTuple_GET_ITEM(types, i))
            return 0;
        v[i++] = value;
    }
    if (PyUnicode_GET_LENGTH(v[IDENT]) == 0 || !isfinite(PyFloat_AS_DOUBLE(v[ENERGY])))
        return 0;
    if (!all_str(v[SOURCES]) || !all_str(v[LINEAGE]))
        return 0;
    *member = PyDict_GetItemWithError(kinds, v[KIND]); /* borrowed */
    if (*member == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return 1;
}

static PyObject *
plain_entries(PyObject *self, PyObject *args)
{
    PyObject *records, *keys, *types, *kinds, *make, *population, *living;
    Py_ssize_t start;
    double opening;
    if (!PyArg_ParseTuple(args, "O!ndO!O!O!OO!O!:plain_entries", &PyList_Type, &records, &start,
                          &opening, &PyTuple_Type, &keys, &PyTuple_Type, &types, &PyDict_Type, &kinds,
                          &make, &PyDict_Type, &population, &PyList_Type, &living))
        return NULL;
    if (PyTuple_GET_SIZE(keys) != NKEYS || PyTuple_GET_SIZE(types) != NKEYS) {
        PyErr_SetString(PyExc_ValueError, "plain_entries takes the eleven written keys and types");
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL)
        return NULL;
    Py_ssize_t i = start < 0 ? 0 : start;
    for (; i < PyList_GET_SIZE(records); i++) {
        PyObject *v[NKEYS], *member;
        int plain = plain_values(PyList_GET_ITEM(records, i), keys, types, kinds, v, &member);
        if (plain < 0)
            goto fail;
        if (plain == 0)
            break;
        int known = PyDict_Contains(population, v[IDENT]);
        if (known < 0)
            goto fail;
        if (known)
            break; /* the caller names the duplicate */
        /* MemoryEntry(question, answer, kind, sources, energy, born_cycle, recorded_ts,
         * last_used_cycle, uses, lineage, pinned, probation, juvenile, imported_from,
         * imported_at, id): read_entry's call, keeping the decoded lists. */
        PyObject *call[16] = {v[QUESTION], v[ANSWER], member, v[SOURCES], v[ENERGY], v[BORN],
                              v[STAMP],    v[LAST],   v[USES], v[LINEAGE], Py_False, zero,
                              zero,        Py_None,   Py_None, v[IDENT]};
        PyObject *entry = PyObject_Vectorcall(make, call, 16, NULL);
        if (entry == NULL)
            goto fail;
        if (PyDict_SetItem(population, v[IDENT], entry) < 0 || PyList_Append(living, entry) < 0) {
            Py_DECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
        opening += PyFloat_AS_DOUBLE(v[ENERGY]); /* in the order read, as Python sums */
    }
    Py_DECREF(zero);
    return Py_BuildValue("nd", i, opening);
fail:
    Py_DECREF(zero);
    return NULL;
}

static PyMethodDef methods[] = {
    {"plain_entries", plain_entries, METH_VARARGS,
     "plain_entries(records, start, opening, keys, types, kinds, make, population, living)\n"
     "    -> (stop, opening)\n\n"
     "From records[start] on, make each plain entry (types.read_entry's shape) with\n"
     "make(...) as read_entry does, add it to population (by id) and living, and add\n"
     "its energy to opening, in order. Stops at the first record that is not plain or\n"
     "whose id population holds; returns its index and the running sum."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_cload",
    .m_doc = "A store file's plain entries, made in C (see darwin_memo.store).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cload(void)
{
    return PyModule_Create(&module);
}
