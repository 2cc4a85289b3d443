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
#include <string.h>

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

static PyObject *name_id, *name_energy; /* "id", "energy", interned */

/* Add an entry read_document made to population and living, and its energy to
 * *opening: 1; 0 where population holds its id already (not added); -1 on failure. */
static int
taken(PyObject *entry, PyObject *population, PyObject *living, double *opening)
{
    PyObject *ident = PyObject_GetAttr(entry, name_id);
    PyObject *energy = ident ? PyObject_GetAttr(entry, name_energy) : NULL;
    int out = -1;
    if (energy == NULL)
        goto done;
    double value = PyFloat_AsDouble(energy);
    if (value == -1.0 && PyErr_Occurred())
        goto done;
    int known = PyDict_Contains(population, ident);
    if (known != 0) {
        out = known < 0 ? -1 : 0;
        goto done;
    }
    if (PyDict_SetItem(population, ident, entry) < 0 || PyList_Append(living, entry) < 0)
        goto done;
    *opening += value;
    out = 1;
done:
    Py_XDECREF(ident);
    Py_XDECREF(energy);
    return out;
}

static PyObject *
plain_entries(PyObject *self, PyObject *args)
{
    PyObject *records, *keys, *types, *kinds, *make, *population, *living;
    Py_ssize_t start;
    double opening;
    int made = 0;
    if (!PyArg_ParseTuple(args, "O!ndO!O!O!OO!O!|p:plain_entries", &PyList_Type, &records,
                          &start, &opening, &PyTuple_Type, &keys, &PyTuple_Type, &types,
                          &PyDict_Type, &kinds, &make, &PyDict_Type, &population, &PyList_Type,
                          &living, &made))
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
        PyObject *v[NKEYS], *member, *record = PyList_GET_ITEM(records, i);
        if (made && Py_IS_TYPE(record, (PyTypeObject *)make)) {
            /* an entry read_document made: taken as it is */
            int got = taken(record, population, living, &opening);
            if (got < 0)
                goto fail;
            if (got == 0) /* its id is known: the caller names the duplicate */
                break;
            continue;
        }
        int plain = plain_values(record, keys, types, kinds, v, &member);
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

/* -- read_document: a store file's bytes, its plain entries made on the way ---------
 *
 * The top-level object is walked here; every value but the "entries" array is handed,
 * as its bytes, to ``loads`` (json.loads: the same objects json.loads makes of them).
 * An element of "entries" written exactly as to_dict writes a plain entry (its eleven
 * keys in order, strings without escapes, numbers of the written types) becomes a
 * MemoryEntry here, as read_entry would make it from the decoded dict; any other
 * element goes to ``loads``. A document this walk does not expect (keys with escapes,
 * anything malformed) gives None, and the caller decodes it whole, as before. */

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
} doc;

static inline Py_ssize_t
skip_ws(const doc *d, Py_ssize_t i)
{
    while (i < d->n && (d->s[i] == ' ' || d->s[i] == '\t' || d->s[i] == '\n' || d->s[i] == '\r'))
        i++;
    return i;
}

/* After a container's item: past a comma (1, *k at the next item) or past the closing
 * ``close`` (0, *k after it); -1 where neither follows. */
static int
after_item(const doc *d, Py_ssize_t *k, unsigned char close)
{
    Py_ssize_t j = skip_ws(d, *k);
    if (j < d->n && d->s[j] == ',') {
        *k = skip_ws(d, j + 1);
        return 1;
    }
    if (j < d->n && d->s[j] == close) {
        *k = j + 1;
        return 0;
    }
    return -1;
}

/* The end of the JSON value at i (not checked: ``loads`` checks it), or -1. */
static Py_ssize_t
skip_value(const doc *d, Py_ssize_t i)
{
    int depth = 0;
    while (i < d->n) {
        unsigned char c = d->s[i];
        if (c == '"') {
            for (i++; i < d->n && d->s[i] != '"'; i++)
                if (d->s[i] == '\\')
                    i++;
            if (i >= d->n)
                return -1;
            i++;
            if (depth == 0)
                return i;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return i; /* the end of a scalar, at its container's close */
            if (--depth == 0)
                return i + 1;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            return i;
        }
        i++;
    }
    return depth == 0 ? i : -1;
}

/* The value at i decoded by ``loads``; *end is where it ends. NULL on error (also for
 * bytes that are not a value: loads raises). */
static PyObject *
loads_at(const doc *d, Py_ssize_t i, PyObject *loads, Py_ssize_t *end)
{
    Py_ssize_t j = skip_value(d, i);
    if (j <= i) {
        PyErr_SetString(PyExc_ValueError, "not a JSON value");
        return NULL;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)d->s + i, j - i);
    if (raw == NULL)
        return NULL;
    PyObject *out = PyObject_CallOneArg(loads, raw);
    Py_DECREF(raw);
    *end = j;
    return out;
}

/* A string at i without escapes or control characters: 1 and its span, or 0. */
static int
plain_span(const doc *d, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *len, Py_ssize_t *end)
{
    if (i >= d->n || d->s[i] != '"')
        return 0;
    Py_ssize_t k = i + 1;
    while (k < d->n && d->s[k] != '"') {
        if (d->s[k] == '\\' || d->s[k] < 0x20)
            return 0;
        k++;
    }
    if (k >= d->n)
        return 0;
    *start = i + 1;
    *len = k - i - 1;
    *end = k + 1;
    return 1;
}

/* The str of a span (UTF-8, valid: the caller decoded the whole file), reusing *slot
 * when it holds the same text (a store repeats its stamps, kinds and sources). */
static PyObject *
span_str(const doc *d, Py_ssize_t start, Py_ssize_t len, PyObject **slot)
{
    if (slot && *slot) {
        Py_ssize_t have;
        const char *text = PyUnicode_AsUTF8AndSize(*slot, &have);
        if (text && have == len && memcmp(text, d->s + start, (size_t)len) == 0)
            return Py_NewRef(*slot);
        PyErr_Clear();
    }
    PyObject *out = PyUnicode_DecodeUTF8((const char *)d->s + start, len, "strict");
    if (out && slot)
        Py_XSETREF(*slot, Py_NewRef(out));
    return out;
}

/* The end of the run of digits at k, or -1 where none is there. */
static Py_ssize_t
digit_run(const doc *d, Py_ssize_t k)
{
    if (k >= d->n || d->s[k] < '0' || d->s[k] > '9')
        return -1;
    while (k < d->n && d->s[k] >= '0' && d->s[k] <= '9')
        k++;
    return k;
}

/* A number at *i: 1 = an int (in *lv, up to 18 digits), 2 = a float (in *dv), 0 = not
 * one this takes. */
static int
plain_number(const doc *d, Py_ssize_t *i, long long *lv, double *dv)
{
    const unsigned char *s = d->s;
    Py_ssize_t k = *i, start = *i, n = d->n;
    int is_float = 0;
    if (k < n && s[k] == '-')
        k++;
    Py_ssize_t digits = k;
    if (k < n && s[k] == '0')
        k++;
    else if (k < n && s[k] >= '1' && s[k] <= '9')
        while (k < n && s[k] >= '0' && s[k] <= '9')
            k++;
    else
        return 0;
    Py_ssize_t int_end = k;
    if (k < n && s[k] == '.') {
        if ((k = digit_run(d, k + 1)) < 0)
            return 0;
        is_float = 1;
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        if ((k = digit_run(d, k)) < 0)
            return 0;
        is_float = 1;
    }
    if (!is_float) {
        if (int_end - digits > 18)
            return 0;
        long long v = 0;
        for (Py_ssize_t m = digits; m < int_end; m++)
            v = v * 10 + (s[m] - '0');
        *lv = s[start] == '-' ? -v : v;
        *i = k;
        return 1;
    }
    char buf[64];
    if (k - start >= (Py_ssize_t)sizeof(buf))
        return 0;
    memcpy(buf, s + start, (size_t)(k - start));
    buf[k - start] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(buf, &stop, NULL); /* what float() makes of it */
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != buf + (k - start))
        return 0;
    *dv = v;
    *i = k;
    return 2;
}

/* The list of plain strings at *i; NULL and no error where it is not one. */
static PyObject *
plain_strings(const doc *d, Py_ssize_t *i, PyObject **slot)
{
    Py_ssize_t k = *i;
    if (k >= d->n || d->s[k] != '[')
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    k = skip_ws(d, k + 1);
    if (k < d->n && d->s[k] == ']') {
        *i = k + 1;
        return out;
    }
    for (;;) {
        Py_ssize_t start, len, end;
        if (!plain_span(d, k, &start, &len, &end))
            goto no;
        PyObject *item = span_str(d, start, len, slot);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
        k = end;
        int more = after_item(d, &k, ']');
        if (more < 0)
            goto no;
        if (more == 0) {
            *i = k;
            return out;
        }
    }
no:
    Py_DECREF(out);
    return NULL;
}

typedef struct {
    PyObject *keys, *kinds, *make, *zero;
    PyObject *stamp, *source, *kind; /* the last of each made: reused when repeated */
} makers;

/* The plain entry at *i as a MemoryEntry (and *i past it); NULL with no error where
 * the element is anything else, NULL with an error on failure. */
static PyObject *
plain_entry(const doc *d, Py_ssize_t *i, makers *m)
{
    PyObject *v[NKEYS] = {NULL};
    PyObject *entry = NULL;
    Py_ssize_t k = *i;
    if (k >= d->n || d->s[k] != '{')
        return NULL;
    k++;
    for (int f = 0; f < NKEYS; f++) {
        Py_ssize_t start, len, end;
        k = skip_ws(d, k);
        PyObject *want = PyTuple_GET_ITEM(m->keys, f);
        Py_ssize_t wlen;
        const char *wtext = PyUnicode_AsUTF8AndSize(want, &wlen);
        if (wtext == NULL)
            goto done;
        if (!plain_span(d, k, &start, &len, &end) || len != wlen ||
            memcmp(d->s + start, wtext, (size_t)len) != 0)
            goto done;
        k = skip_ws(d, end);
        if (k >= d->n || d->s[k] != ':')
            goto done;
        k = skip_ws(d, k + 1);
        if (f == SOURCES || f == LINEAGE) {
            v[f] = plain_strings(d, &k, &m->source);
        } else if (f == ENERGY || f == BORN || f == LAST || f == USES) {
            long long lv = 0;
            double dv = 0.0;
            int got = plain_number(d, &k, &lv, &dv);
            if (got != (f == ENERGY ? 2 : 1))
                goto done;
            v[f] = f == ENERGY ? PyFloat_FromDouble(dv) : PyLong_FromLongLong(lv);
        } else {
            if (!plain_span(d, k, &start, &len, &end))
                goto done;
            PyObject **slot = f == STAMP ? &m->stamp : f == KIND ? &m->kind : NULL;
            v[f] = span_str(d, start, len, slot);
            k = end;
        }
        if (v[f] == NULL)
            goto done;
        k = skip_ws(d, k);
        if (k >= d->n || d->s[k] != (f == NKEYS - 1 ? '}' : ','))
            goto done;
        k++;
    }
    if (PyUnicode_GET_LENGTH(v[IDENT]) == 0 || !isfinite(PyFloat_AS_DOUBLE(v[ENERGY])))
        goto done;
    PyObject *member = PyDict_GetItemWithError(m->kinds, v[KIND]); /* borrowed */
    if (member == NULL)
        goto done;
    PyObject *call[16] = {v[QUESTION], v[ANSWER], member,  v[SOURCES], v[ENERGY], v[BORN],
                          v[STAMP],    v[LAST],   v[USES], v[LINEAGE], Py_False,  m->zero,
                          m->zero,     Py_None,   Py_None, v[IDENT]};
    entry = PyObject_Vectorcall(m->make, call, 16, NULL);
    if (entry != NULL)
        *i = k;
done:
    for (int f = 0; f < NKEYS; f++)
        Py_XDECREF(v[f]);
    return entry;
}

static PyObject *
read_entries_array(const doc *d, Py_ssize_t *i, makers *m, PyObject *loads)
{
    Py_ssize_t k = skip_ws(d, *i + 1); /* past '[' */
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (k < d->n && d->s[k] == ']') {
        *i = k + 1;
        return out;
    }
    for (;;) {
        Py_ssize_t at = k;
        PyObject *item = plain_entry(d, &k, m);
        if (item == NULL) {
            if (PyErr_Occurred())
                goto fail;
            item = loads_at(d, at, loads, &k); /* anything else, as json.loads makes it */
            if (item == NULL)
                goto fail;
        }
        int failed = PyList_Append(out, item);
        Py_DECREF(item);
        if (failed)
            goto fail;
        int more = after_item(d, &k, ']');
        if (more == 0) {
            *i = k;
            return out;
        }
        if (more < 0) {
            PyErr_SetString(PyExc_ValueError, "the entries array is not well formed");
            goto fail;
        }
    }
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *
read_document(PyObject *self, PyObject *args)
{
    Py_buffer b;
    makers m = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *loads, *payload = NULL;
    if (!PyArg_ParseTuple(args, "y*O!O!OO:read_document", &b, &PyTuple_Type, &m.keys,
                          &PyDict_Type, &m.kinds, &m.make, &loads))
        return NULL;
    if (PyTuple_GET_SIZE(m.keys) != NKEYS) {
        PyErr_SetString(PyExc_ValueError, "read_document takes the eleven written keys");
        goto done;
    }
    m.zero = PyLong_FromLong(0);
    payload = PyDict_New();
    if (m.zero == NULL || payload == NULL)
        goto fail;
    doc d = {(const unsigned char *)b.buf, b.len};
    Py_ssize_t k = skip_ws(&d, 0);
    if (k >= d.n || d.s[k] != '{')
        goto unexpected;
    k = skip_ws(&d, k + 1);
    if (k < d.n && d.s[k] == '}') {
        k++;
    } else {
        for (;;) {
            Py_ssize_t start, len, end;
            if (!plain_span(&d, k, &start, &len, &end))
                goto unexpected;
            PyObject *key = span_str(&d, start, len, NULL);
            if (key == NULL)
                goto fail;
            k = skip_ws(&d, end);
            if (k >= d.n || d.s[k] != ':') {
                Py_DECREF(key);
                goto unexpected;
            }
            k = skip_ws(&d, k + 1);
            PyObject *value;
            if (len == 7 && memcmp(d.s + start, "entries", 7) == 0 && k < d.n && d.s[k] == '[')
                value = read_entries_array(&d, &k, &m, loads);
            else
                value = loads_at(&d, k, loads, &k);
            int failed = value == NULL || PyDict_SetItem(payload, key, value) < 0;
            Py_DECREF(key);
            Py_XDECREF(value);
            if (failed)
                goto fail;
            int more = after_item(&d, &k, '}');
            if (more < 0)
                goto unexpected;
            if (more == 0)
                break;
        }
    }
    if (skip_ws(&d, k) != d.n)
        goto unexpected;
    goto done;
unexpected:
    Py_CLEAR(payload);
    payload = Py_NewRef(Py_None);
    goto done;
fail:
    Py_CLEAR(payload);
done:
    Py_XDECREF(m.zero);
    Py_XDECREF(m.stamp);
    Py_XDECREF(m.source);
    Py_XDECREF(m.kind);
    PyBuffer_Release(&b);
    return payload;
}

static PyMethodDef methods[] = {
    {"plain_entries", plain_entries, METH_VARARGS,
     "plain_entries(records, start, opening, keys, types, kinds, make, population, living,\n"
     "              made=False) -> (stop, opening)\n\n"
     "From records[start] on, make each plain entry (types.read_entry's shape) with\n"
     "make(...) as read_entry does, add it to population (by id) and living, and add\n"
     "its energy to opening, in order. Stops at the first record that is not plain or\n"
     "whose id population holds; returns its index and the running sum. With made,\n"
     "a record that is already a make instance (read_document's) is taken as it is."},
    {"read_document", read_document, METH_VARARGS,
     "read_document(raw, keys, kinds, make, loads) -> dict | None\n\n"
     "A store file's UTF-8 bytes (valid) decoded as json.loads decodes them, except\n"
     "that each element of the top-level \"entries\" array written as a plain entry\n"
     "is already make(...) (read_entry's call); other values go through loads(bytes).\n"
     "None where the document is not laid out as this expects (decode it whole)."},
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
    name_id = PyUnicode_InternFromString("id");
    name_energy = PyUnicode_InternFromString("energy");
    if (name_id == NULL || name_energy == NULL)
        return NULL;
    return PyModule_Create(&module);
}
