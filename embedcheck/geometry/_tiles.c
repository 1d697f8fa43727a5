/* Tile kernels of the exact neighbourhood passes (embedcheck.geometry.tiles): one read of a float32
 * score tile instead of numpy's several passes and temporaries. Comparisons only, no arithmetic on
 * the scores: the results are the same as the numpy formulation tiles.py keeps beside this file
 * (used where this extension was not built), on every CPU.
 *
 *   scan_range: dedup's tile pass — the pairs at or above a threshold (row-major order), each row's
 *     best column and (in one corpus) each column's best row, ties to the lowest index;
 *   reach_counts / reach_gather: the top-k search's candidate pass — the entries of each row at or
 *     above that row's bound, compacted in column order with their tie ranks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

static int need(Py_buffer *v, Py_ssize_t bytes, const char *what) {
    if (v->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, need %zd", what, v->len, bytes);
        return 0;
    }
    return 1;
}

/* scan_range(m, b, t, row0, col0, diag, thr, rv, rr, cv, cr, cols, oi, oj, oc, cap) -> pairs.
 * m: b x t float32 scores of rows row0.. against columns col0..; diag: only columns j > row (one
 * corpus). rv/rr (b): each row's best score and column so far, updated (a later column only when
 * strictly better: ties keep the lowest column); with cols, cv/cr (t) likewise per column over rows.
 * Pairs m >= thr are written to oi/oj/oc (global row, column, score) up to cap; the count returned
 * may exceed cap (the caller grows its buffers and scans again: the updates are idempotent). */
static PyObject *scan_range(PyObject *self, PyObject *args) {
    Py_buffer M, RV, RR, CV, CR, OI, OJ, OC;
    Py_ssize_t b, t, row0, col0, cap;
    int diag, cols, ok = 1;
    float thr;
    Py_ssize_t count = 0;
    if (!PyArg_ParseTuple(args, "y*nnnnpfw*w*w*w*pw*w*w*n", &M, &b, &t, &row0, &col0, &diag, &thr, &RV, &RR, &CV,
                          &CR, &cols, &OI, &OJ, &OC, &cap))
        return NULL;
    ok = need(&M, b * t * 4, "scores") && need(&RV, b * 4, "rv") && need(&RR, b * 8, "rr") &&
         (!cols || (need(&CV, t * 4, "cv") && need(&CR, t * 8, "cr"))) && need(&OI, cap * 8, "oi") &&
         need(&OJ, cap * 8, "oj") && need(&OC, cap * 4, "oc");
    if (ok) {
        const float *m = (const float *)M.buf;
        float *rv = (float *)RV.buf, *cv = (float *)CV.buf, *oc = (float *)OC.buf;
        int64_t *rr = (int64_t *)RR.buf, *cr = (int64_t *)CR.buf, *oi = (int64_t *)OI.buf, *oj = (int64_t *)OJ.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < b; i++) {
            const float *row = m + i * t;
            Py_ssize_t start = 0;
            if (diag) {
                start = row0 + i - col0 + 1;
                if (start < 0) start = 0;
            }
            float best = rv[i];
            int64_t arg = rr[i];
            for (Py_ssize_t j = start; j < t; j++) {
                float v = row[j];
                if (v > best) {
                    best = v;
                    arg = col0 + j;
                }
                if (cols && v > cv[j]) {
                    cv[j] = v;
                    cr[j] = row0 + i;
                }
                if (v >= thr) {
                    if (count < cap) {
                        oi[count] = row0 + i;
                        oj[count] = col0 + j;
                        oc[count] = v;
                    }
                    count++;
                }
            }
            rv[i] = best;
            rr[i] = arg;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&M);
    PyBuffer_Release(&RV);
    PyBuffer_Release(&RR);
    PyBuffer_Release(&CV);
    PyBuffer_Release(&CR);
    PyBuffer_Release(&OI);
    PyBuffer_Release(&OJ);
    PyBuffer_Release(&OC);
    if (!ok) return NULL;
    return PyLong_FromSsize_t(count);
}

/* reach_counts(s, b, t, thr, counts, limit) -> the largest count, or limit + 1 as soon as a row has
 * more than limit entries s[i, j] >= thr[i] (counts then incomplete). */
static PyObject *reach_counts(PyObject *self, PyObject *args) {
    Py_buffer S, T, C;
    Py_ssize_t b, t, limit, width = 0;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "y*nny*w*n", &S, &b, &t, &T, &C, &limit)) return NULL;
    ok = need(&S, b * t * 4, "scores") && need(&T, b * 4, "bounds") && need(&C, b * 8, "counts");
    if (ok) {
        const float *s = (const float *)S.buf, *thr = (const float *)T.buf;
        int64_t *counts = (int64_t *)C.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < b; i++) {
            const float *row = s + i * t;
            const float bound = thr[i];
            Py_ssize_t n = 0;
            for (Py_ssize_t j = 0; j < t; j++) n += row[j] >= bound;
            counts[i] = n;
            if (n > width) width = n;
            if (width > limit) break;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&S);
    PyBuffer_Release(&T);
    PyBuffer_Release(&C);
    if (!ok) return NULL;
    return PyLong_FromSsize_t(width);
}

/* reach_gather(s, b, t, thr, ranks, col0, width, cols, vals, rks): per row, its entries s[i, j] >= thr[i]
 * in column order (at most width), as (col0 + j, s[i, j], ranks[j]), the rest of the row padded with
 * (col0, -inf, INT64_MAX). */
static PyObject *reach_gather(PyObject *self, PyObject *args) {
    Py_buffer S, T, R, OC, OV, OR;
    Py_ssize_t b, t, col0, width;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "y*nny*y*nnw*w*w*", &S, &b, &t, &T, &R, &col0, &width, &OC, &OV, &OR)) return NULL;
    ok = need(&S, b * t * 4, "scores") && need(&T, b * 4, "bounds") && need(&R, t * 8, "ranks") &&
         need(&OC, b * width * 8, "cols") && need(&OV, b * width * 4, "vals") && need(&OR, b * width * 8, "rks");
    if (ok) {
        const float *s = (const float *)S.buf, *thr = (const float *)T.buf;
        const int64_t *ranks = (const int64_t *)R.buf;
        int64_t *oc = (int64_t *)OC.buf, *orr = (int64_t *)OR.buf;
        float *ov = (float *)OV.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < b; i++) {
            const float *row = s + i * t;
            const float bound = thr[i];
            Py_ssize_t n = 0, base = i * width;
            for (Py_ssize_t j = 0; j < t && n < width; j++) {
                if (row[j] >= bound) {
                    oc[base + n] = col0 + j;
                    ov[base + n] = row[j];
                    orr[base + n] = ranks[j];
                    n++;
                }
            }
            for (; n < width; n++) {
                oc[base + n] = col0;
                ov[base + n] = -INFINITY;
                orr[base + n] = INT64_MAX;
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&S);
    PyBuffer_Release(&T);
    PyBuffer_Release(&R);
    PyBuffer_Release(&OC);
    PyBuffer_Release(&OV);
    PyBuffer_Release(&OR);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan_range", scan_range, METH_VARARGS, "dedup's tile pass: pairs at or above a threshold, row and column bests"},
    {"reach_counts", reach_counts, METH_VARARGS, "entries of each row at or above its bound: the counts"},
    {"reach_gather", reach_gather, METH_VARARGS, "entries of each row at or above its bound: compacted"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tiles", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tiles(void) { return PyModule_Create(&module); }
