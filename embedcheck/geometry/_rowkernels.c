/* Row kernels of AAG's passes (embedcheck.geometry.rowsums): each row read once, straight from its
 * float32 or float64 storage, widened to double exactly.
 *
 * The arithmetic is fixed, so the results are the same bits on every CPU and in the numpy
 * formulation embedcheck.geometry.rowsums keeps beside this file (used where this extension was not
 * built):
 *   - a row's dot product (its squared norm, or its product with a direction) is summed in 8 lanes,
 *     lane l taking elements j = l, l + 8, ... in order (the d % 8 trailing elements go to lane 0
 *     after them), the lanes combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
 *   - a cell's sum adds a * x[j] (a product, then a sum: never a fused multiply-add) row by row.
 * The build passes -ffp-contract=off and never -ffast-math; function clones for AVX-512 and AVX2 on
 * x86-64 run the same operations in the same order (EMBEDCHECK_NO_CLONES: one version, for the
 * instruction set the compiler is told; tests/test_rowsums.py builds several and compares their bits).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && defined(__linux__) && !defined(EMBEDCHECK_NO_CLONES)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

#define ROW_DOT(T, X, Y, D, OUT)                                                  \
    do {                                                                          \
        double l_[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                  \
        Py_ssize_t d8_ = (D) - (D) % 8, j_;                                       \
        for (j_ = 0; j_ < d8_; j_ += 8) {                                         \
            for (int q_ = 0; q_ < 8; q_++) {                                      \
                double p_ = (double)(X)[j_ + q_] * (double)(Y)[j_ + q_];          \
                l_[q_] += p_;                                                     \
            }                                                                     \
        }                                                                         \
        for (j_ = d8_; j_ < (D); j_++) {                                          \
            double p_ = (double)(X)[j_] * (double)(Y)[j_];                        \
            l_[0] += p_;                                                          \
        }                                                                         \
        (OUT) = ((l_[0] + l_[1]) + (l_[2] + l_[3])) + ((l_[4] + l_[5]) + (l_[6] + l_[7])); \
    } while (0)

#define SCATTER_BODY(T)                                                           \
    Py_ssize_t refused = 0;                                                       \
    for (Py_ssize_t i = 0; i < b; i++) {                                          \
        const T *x = (const T *)xs + i * d;                                       \
        double s, r, a, q;                                                        \
        ROW_DOT(T, x, x, d, s);                                                   \
        sq[i] = s;                                                                \
        refused += !(s >= tiny && s < INFINITY);                                  \
        r = sqrt(s);                                                              \
        if (!guard || r > 0) r = 1.0 / r;                                         \
        inv[i] = r;                                                               \
        a = w ? r * w[i] : r;                                                     \
        q = (s * r) * r;                                                          \
        if (w) q *= w[i] * w[i];                                                  \
        for (int t = 0; t < 2; t++) {                                             \
            if (!cells[t]) continue;                                              \
            Py_ssize_t c = cells[t][i] + offs[t];                                 \
            double *o = out + c * d;                                              \
            qcell[c] += q;                                                        \
            for (Py_ssize_t j = 0; j < d; j++) {                                  \
                double p = a * (double)x[j];                                      \
                o[j] += p;                                                        \
            }                                                                     \
        }                                                                         \
    }                                                                             \
    return refused;

CLONES static Py_ssize_t scatter_f32(const void *xs, Py_ssize_t b, Py_ssize_t d, const int64_t *const *cells,
                                     const Py_ssize_t *offs, const double *w, double *out, double *qcell,
                                     double *sq, double *inv, int guard, double tiny) {
    SCATTER_BODY(float)
}

CLONES static Py_ssize_t scatter_f64(const void *xs, Py_ssize_t b, Py_ssize_t d, const int64_t *const *cells,
                                     const Py_ssize_t *offs, const double *w, double *out, double *qcell,
                                     double *sq, double *inv, int guard, double tiny) {
    SCATTER_BODY(double)
}

#define PROJECT_BODY(T)                                                           \
    for (Py_ssize_t i = 0; i < b; i++) {                                          \
        const T *x = (const T *)xs + i * d;                                       \
        for (Py_ssize_t t = 0; t < r; t++) {                                      \
            const double *qt = q + t * d;                                         \
            double z;                                                             \
            ROW_DOT(T, x, qt, d, z);                                              \
            out[i * r + t] = z;                                                   \
        }                                                                         \
    }

CLONES static void project_f32(const void *xs, Py_ssize_t b, Py_ssize_t d, const double *q,
                               Py_ssize_t r, double *out) {
    PROJECT_BODY(float)
}

CLONES static void project_f64(const void *xs, Py_ssize_t b, Py_ssize_t d, const double *q,
                               Py_ssize_t r, double *out) {
    PROJECT_BODY(double)
}

CLONES static void norms_f32(const void *xs, Py_ssize_t b, Py_ssize_t d, double *out) {
    for (Py_ssize_t i = 0; i < b; i++) {
        const float *x = (const float *)xs + i * d;
        ROW_DOT(float, x, x, d, out[i]);
    }
}

CLONES static void norms_f64(const void *xs, Py_ssize_t b, Py_ssize_t d, double *out) {
    for (Py_ssize_t i = 0; i < b; i++) {
        const double *x = (const double *)xs + i * d;
        ROW_DOT(double, x, x, d, out[i]);
    }
}

static int need(Py_buffer *v, Py_ssize_t bytes, const char *what) {
    if (v->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, needs %zd", what, v->len, bytes);
        return 0;
    }
    return 1;
}

/* scatter_unit_rows(x, itemsize, b, d, cells_a, off_a, cells_b or None, off_b, w or None, out, m, qcell,
 *                   sq, inv, guard, tiny) -> the number of rows whose squared norm is not in [tiny, inf):
 * per row i, in order: sq[i] = x·x, inv[i] = 1/sqrt(sq[i]) (with guard: a zero row keeps 0), and for
 * its cell c = cells_a[i] + off_a and then (with cells_b) c = cells_b[i] + off_b:
 * out[c] += a * x (a = inv[i], times w[i] with weights) and qcell[c] += (sq[i] * inv[i]) * inv[i]
 * (times w[i] * w[i]). */
static PyObject *scatter_unit_rows(PyObject *self, PyObject *args) {
    Py_buffer X, A, B = {0}, W = {0}, O, QC, S, I;
    Py_ssize_t itemsize, b, d, m, offs[2];
    PyObject *bobj, *wobj;
    int guard, ok = 1;
    double tiny;
    Py_ssize_t refused = 0;
    if (!PyArg_ParseTuple(args, "y*nnny*nOnOw*nw*w*w*pd", &X, &itemsize, &b, &d, &A, &offs[0], &bobj, &offs[1],
                          &wobj, &O, &m, &QC, &S, &I, &guard, &tiny))
        return NULL;
    int has_b = bobj != Py_None, has_w = wobj != Py_None;
    if (has_b && PyObject_GetBuffer(bobj, &B, PyBUF_SIMPLE) < 0) ok = 0;
    if (ok && has_w && PyObject_GetBuffer(wobj, &W, PyBUF_SIMPLE) < 0) ok = 0;
    if (ok && (itemsize != 4 && itemsize != 8)) {
        PyErr_SetString(PyExc_ValueError, "rows must be float32 or float64");
        ok = 0;
    }
    if (ok && (b < 0 || d < 1 || m < 1)) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        ok = 0;
    }
    ok = ok && need(&X, b * d * itemsize, "rows") && need(&A, b * 8, "cells") && (!has_b || need(&B, b * 8, "cells")) &&
         need(&O, m * d * 8, "out") && need(&QC, m * 8, "qcell") && need(&S, b * 8, "sq") && need(&I, b * 8, "inv") &&
         (!has_w || need(&W, b * 8, "weights"));
    const int64_t *cells[2] = {(const int64_t *)A.buf, has_b ? (const int64_t *)B.buf : NULL};
    for (int t = 0; ok && t < 2; t++) {
        if (!cells[t]) continue;
        for (Py_ssize_t i = 0; i < b; i++) {
            int64_t c = cells[t][i] + offs[t];
            if (c < 0 || c >= m) {
                PyErr_Format(PyExc_ValueError, "cell %lld outside [0, %zd)", (long long)c, m);
                ok = 0;
                break;
            }
        }
    }
    if (ok) {
        const double *w = has_w ? (const double *)W.buf : NULL;
        Py_BEGIN_ALLOW_THREADS
        if (itemsize == 4)
            refused = scatter_f32(X.buf, b, d, cells, offs, w, (double *)O.buf, (double *)QC.buf, (double *)S.buf,
                                  (double *)I.buf, guard, tiny);
        else
            refused = scatter_f64(X.buf, b, d, cells, offs, w, (double *)O.buf, (double *)QC.buf, (double *)S.buf,
                                  (double *)I.buf, guard, tiny);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&X);
    PyBuffer_Release(&A);
    if (has_b && B.obj) PyBuffer_Release(&B);
    if (has_w && W.obj) PyBuffer_Release(&W);
    PyBuffer_Release(&O);
    PyBuffer_Release(&QC);
    PyBuffer_Release(&S);
    PyBuffer_Release(&I);
    if (!ok) return NULL;
    return PyLong_FromSsize_t(refused);
}

/* project_rows(x, itemsize, b, d, q, r, out): out[i, t] = x_i · q_t (q: r × d float64). */
static PyObject *project_rows(PyObject *self, PyObject *args) {
    Py_buffer X, Q, O;
    Py_ssize_t itemsize, b, d, r;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "y*nnny*nw*", &X, &itemsize, &b, &d, &Q, &r, &O)) return NULL;
    if (itemsize != 4 && itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "rows must be float32 or float64");
        ok = 0;
    }
    if (ok && (b < 0 || d < 1 || r < 1)) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        ok = 0;
    }
    ok = ok && need(&X, b * d * itemsize, "rows") && need(&Q, r * d * 8, "directions") && need(&O, b * r * 8, "out");
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (itemsize == 4)
            project_f32(X.buf, b, d, (const double *)Q.buf, r, (double *)O.buf);
        else
            project_f64(X.buf, b, d, (const double *)Q.buf, r, (double *)O.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&X);
    PyBuffer_Release(&Q);
    PyBuffer_Release(&O);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* row_norms(x, itemsize, b, d, out): out[i] = x_i · x_i. */
static PyObject *row_norms(PyObject *self, PyObject *args) {
    Py_buffer X, O;
    Py_ssize_t itemsize, b, d;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "y*nnnw*", &X, &itemsize, &b, &d, &O)) return NULL;
    if (itemsize != 4 && itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "rows must be float32 or float64");
        ok = 0;
    }
    if (ok && (b < 0 || d < 1)) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        ok = 0;
    }
    ok = ok && need(&X, b * d * itemsize, "rows") && need(&O, b * 8, "out");
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (itemsize == 4)
            norms_f32(X.buf, b, d, (double *)O.buf);
        else
            norms_f64(X.buf, b, d, (double *)O.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&X);
    PyBuffer_Release(&O);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"row_norms", row_norms, METH_VARARGS, "rows' squared norms"},
    {"scatter_unit_rows", scatter_unit_rows, METH_VARARGS, "rows' norms and their unit rows added into cells"},
    {"project_rows", project_rows, METH_VARARGS, "rows' products with a few directions"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowkernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rowkernels(void) { return PyModule_Create(&module); }
