/* The loops of a recall that numpy can only do in several passes over every match: the
 * postings' BM25 parts summed per memory (every match's, or only the best few or those over a
 * floor, without writing out the rest; or a few memories' own), each match's score bound, the
 * best few matches by a value; the 3-gram channel's dot products (a dozen numpy calls for
 * a pool of twenty); and the page of rows a recall shows, read from their Arrow columns.
 * A long pass over the postings is shared with a worker thread of the kernel's (`best_sums`).
 * Each computes what core/scoring.py's formulas compute, operation for operation in the same
 * order (built with -ffp-contract=off: no fused multiply-add): the sums and the choice of the
 * best are numpy's to the last bit, the bounds to 1e-15 (their exp is the C library's; see
 * `bounds`). tests/test_compiled_kernel.py holds them against the numpy code. Wrapped, with
 * the checks of its arguments, by core/kernels.py. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* A contiguous array of `ndim` dimensions (1, or 2: rows) of the kind `want` names: 'b' int8,
 * 'i' int32, 'q' int64, 'f' float32, 'd' float64 (numpy's formats, with or without a
 * byte-order mark). */
static int take_dims(PyObject *obj, Buf *b, int writable, char want, int ndim) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) return -1;
    b->held = 1;
    const char *fmt = b->view.format ? b->view.format : "B";
    char got = fmt[0] && strchr("@=<>!", fmt[0]) ? fmt[1] : fmt[0];
    Py_ssize_t size = b->view.itemsize;
    int ok = b->view.ndim == ndim
             && ((want == 'd' && got == 'd') || (want == 'f' && got == 'f') || (want == 'b' && got == 'b')
                 || (want == 'i' && (got == 'i' || got == 'l') && size == 4)
                 || (want == 'q' && (got == 'q' || got == 'l') && size == 8));
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "expected a %s array of %s, got format '%s'",
                     ndim == 1 ? "one-dimensional" : "two-dimensional",
                     want == 'd' ? "float64" : want == 'f' ? "float32" : want == 'b' ? "int8"
                     : want == 'i' ? "int32" : "int64", fmt);
        PyBuffer_Release(&b->view);
        b->held = 0;
        return -1;
    }
    return 0;
}

static int take(PyObject *obj, Buf *b, int writable, char want) { return take_dims(obj, b, writable, want, 1); }

static void give(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

static Py_ssize_t count(Buf *b, Py_ssize_t itemsize) { return b->view.len / itemsize; }

/* Memories are summed a block at a time, in a buffer that stays in the core's cache where
 * one array of every memory would not: 32,768 of them, 256 KB. */
#define BLOCK 32768

/* A question's terms as the loops read them: term p's postings are docs[p] (int32) and tfs[p]
 * (float32), len[p] of them, its weight w[p] = (qtf·idf)·(k1 + 1). */
typedef struct {
    Py_ssize_t n;
    Buf *d, *f;
    double *w;
    const int32_t **dv;
    const float **fv;
    Py_ssize_t *len;
    int sorted;             /* every term's documents in ascending order (so far as checked) */
    int64_t first, last;    /* the lowest and the highest document (-1, -1: none) */
} Terms;

static void drop_terms(Terms *t) {
    for (Py_ssize_t p = 0; t->d && t->f && p < t->n; p++) { give(&t->d[p]); give(&t->f[p]); }
    free(t->d); free(t->f); free(t->w); free(t->dv); free(t->fv); free(t->len);
    memset(t, 0, sizeof *t);
}

/* The three lists (docs, tfs, weights) as Terms, every document checked against the n_norm
 * memories the norms cover. 0, or -1 with the exception set. A term whose documents are out
 * of order leaves `sorted` 0 (numpy's turn: the loops here walk them in order). With `scan` 0
 * only each term's first and last are read here: the block loops check the order on their
 * way (sum_block), which spares a pass over every posting. */
static int load_terms(PyObject *docs_list, PyObject *tfs_list, PyObject *weights_list, Py_ssize_t n_norm,
                      int scan, Terms *t) {
    memset(t, 0, sizeof *t);
    t->first = t->last = -1;
    t->sorted = 1;
    Py_ssize_t n = PyList_Size(docs_list);
    if (n < 0 || PyList_Size(tfs_list) != n || PyList_Size(weights_list) != n) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "docs, tfs and weights must be lists of one length");
        return -1;
    }
    t->d = calloc(n + 1, sizeof(Buf));
    t->f = calloc(n + 1, sizeof(Buf));
    t->w = calloc(n + 1, sizeof(double));
    t->dv = calloc(n + 1, sizeof(int32_t *));
    t->fv = calloc(n + 1, sizeof(float *));
    t->len = calloc(n + 1, sizeof(Py_ssize_t));
    if (!t->d || !t->f || !t->w || !t->dv || !t->fv || !t->len) {
        drop_terms(t);
        PyErr_NoMemory();
        return -1;
    }
    t->n = n;
    for (Py_ssize_t p = 0; p < n; p++) {
        t->w[p] = PyFloat_AsDouble(PyList_GET_ITEM(weights_list, p));
        if (t->w[p] == -1.0 && PyErr_Occurred()) goto fail;
        if (take(PyList_GET_ITEM(docs_list, p), &t->d[p], 0, 'i') < 0
            || take(PyList_GET_ITEM(tfs_list, p), &t->f[p], 0, 'f') < 0)
            goto fail;
        Py_ssize_t len = count(&t->d[p], 4);
        const int32_t *dv = t->d[p].view.buf;
        if (count(&t->f[p], 4) != len) {
            PyErr_SetString(PyExc_ValueError, "a term's docs and tfs differ in length");
            goto fail;
        }
        t->dv[p] = dv;
        t->fv[p] = t->f[p].view.buf;
        t->len[p] = len;
        for (Py_ssize_t i = 1; scan && t->sorted && i < len; i++)
            if (dv[i] < dv[i - 1]) t->sorted = 0;
        if (len && dv[len - 1] < dv[0]) t->sorted = 0;
        if (!t->sorted || !len) continue;
        if (dv[0] < 0 || dv[len - 1] >= n_norm) {
            PyErr_SetString(PyExc_IndexError, "a posting's document is outside the arrays");
            goto fail;
        }
        if (dv[len - 1] > t->last) t->last = dv[len - 1];
        if (t->first < 0 || dv[0] < t->first) t->first = dv[0];
    }
    return 0;
fail:
    drop_terms(t);
    return -1;
}

/* What one posting adds to its memory's BM25: numpy's weight·tf / (tf + norm), the tf + norm
 * taken in float32 as numpy takes it, the rest in float64. */
static inline double part_of(double w, float tf, float norm) {
    float den = tf + norm;
    return w * (double)tf / (double)den;
}

/* One block's sums: every posting of a document in base..base + BLOCK − 1 (each term's from
 * at[p] on, at[p] left after them) adds part_of to sum[doc − base], the terms in their order,
 * and marks the document in `bits` (without a branch on the part: one that is 0 leaves a sum
 * that best_sums passes over). -1 where a term's documents turn out to be
 * out of order (one below the one before it, or above its last): the block is then partly
 * summed, and the caller clears it. */
static int sum_block(const Terms *t, Py_ssize_t *at, int64_t base, const float *K, double *sum, uint64_t *bits) {
    int64_t end = base + BLOCK;
    for (Py_ssize_t p = 0; p < t->n; p++) {
        const int32_t *dv = t->dv[p];
        const float *fv = t->fv[p];
        Py_ssize_t i = at[p], n = t->len[p];
        if (i >= n) continue;
        double w = t->w[p];
        int32_t prev = i ? dv[i - 1] : dv[0], last = dv[n - 1];
        for (; i < n && dv[i] < end; i++) {
            int32_t doc = dv[i];
            if (doc < prev || doc > last) return -1;
            prev = doc;
            int32_t j = doc - (int32_t)base;
            sum[j] += part_of(w, fv[i], K[doc]);
            bits[j >> 6] |= (uint64_t)1 << (j & 63);  /* (a sum left at 0 is passed over when read) */
        }
        at[p] = i;
    }
    return 0;
}

/* Whether the blocks read every posting: a term left with postings after the last block has
 * one above its own last document, out of order. */
static int read_all(const Terms *t, const Py_ssize_t *at) {
    for (Py_ssize_t p = 0; p < t->n; p++)
        if (at[p] < t->len[p]) return 0;
    return 1;
}

/* The buffer of one block's sums, all zeros between calls (each sum is read and cleared, and a
 * call that stops in a block clears it whole). One for the module, the caller's: a pass runs
 * with the GIL held, so no two use it at once (the worker's share has a buffer of its own). */
static double block_sums[BLOCK];

/* The first posting of a term at `doc` or after (its documents ascending). */
static Py_ssize_t first_at(const Terms *t, Py_ssize_t p, int64_t doc) {
    Py_ssize_t lo = 0, hi = t->len[p];
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (t->dv[p][mid] < doc) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* One memory's BM25 exactly as the blocks sum it: each term's parts (a binary search in
 * its documents), in the terms' order, added to 0. */
static double sum_at(const Terms *t, int32_t doc, const float *K) {
    double s = 0.0;
    for (Py_ssize_t p = 0; p < t->n; p++)
        for (Py_ssize_t i = first_at(t, p, doc); i < t->len[p] && t->dv[p][i] == doc; i++)
            s += part_of(t->w[p], t->fv[p][i], K[doc]);
    return s;
}

typedef struct {
    int64_t doc;
    double sum;
} Held;

/* The k-th largest of n values (1 <= k <= n), the values reordered: a quickselect. */
static double kth_largest(double *v, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1, want = n - k;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) { double t = v[i]; v[i] = v[j]; v[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return v[want];
    }
    return v[want];
}

/* The best k of the sums offered: every one at the bar or above is kept, and when the pool
 * fills, the k-th best of it becomes the bar and the rest are let go (ties to it stay: which
 * of them wins is decided at the end, by document). A pass costs a comparison per sum, and
 * a cut now and then, where a heap of k paid a climb down the heap for most of them. */
typedef struct {
    Held *e;
    double *scratch;
    Py_ssize_t n, cap, k;
    double bar;
} Pool;

static int pool_cut(Pool *p) {
    for (Py_ssize_t i = 0; i < p->n; i++) p->scratch[i] = p->e[i].sum;
    double kth = kth_largest(p->scratch, p->n, p->k);
    if (kth > p->bar) p->bar = kth;
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < p->n; i++)
        if (p->e[i].sum >= p->bar) p->e[kept++] = p->e[i];
    p->n = kept;
    if (kept > p->cap / 2) {  /* (many tied at the bar: room to go on) */
        Held *e = realloc(p->e, 2 * p->cap * sizeof(Held));
        if (!e) return -1;
        p->e = e;
        double *sc = realloc(p->scratch, 2 * p->cap * sizeof(double));
        if (!sc) return -1;
        p->scratch = sc;
        p->cap *= 2;
    }
    return 0;
}

static inline int pool_add(Pool *p, int64_t doc, double sum) {
    if (p->n == p->cap && pool_cut(p) < 0) return -1;
    p->e[p->n].doc = doc;
    p->e[p->n++].sum = sum;
    return 0;
}

/* The k best of the pool (a tie to the lower document) in its first entries, by document
 * (the order they came in, which a cut keeps); how many. */
static Py_ssize_t pool_best(Pool *p) {
    if (p->n <= p->k) return p->n;
    for (Py_ssize_t i = 0; i < p->n; i++) p->scratch[i] = p->e[i].sum;
    double kth = kth_largest(p->scratch, p->n, p->k);
    Py_ssize_t above = 0, kept = 0;
    for (Py_ssize_t i = 0; i < p->n; i++) above += p->e[i].sum > kth;
    Py_ssize_t ties = p->k - above;  /* (of those at the k-th sum, the lowest documents: the first met) */
    for (Py_ssize_t i = 0; i < p->n; i++)
        if (p->e[i].sum > kth || (p->e[i].sum == kth && ties-- > 0)) p->e[kept++] = p->e[i];
    return kept;
}

/* One thread's share of a pass: blocks from..to − 1 summed into `sum` (its own buffer, zeros
 * between calls) and drained into its pool (k > 0) or its list (every sum at the floor or over
 * it, ascending). `status`: 0; -1 a term's documents out of order; -2 no memory; -3 more matches
 * than the list holds. */
typedef struct {
    Pool pool;
    int64_t *out;
    double *sc;
    Py_ssize_t found, room;
    Py_ssize_t *at;
    double *sum;
    int status;
} Part;

static void sum_blocks(const Terms *t, const float *K, Part *p, int64_t from, int64_t to) {
    uint64_t bits[BLOCK / 64];
    memset(bits, 0, sizeof bits);
    double *sum = p->sum;
    for (int64_t base = from; base < to; base += BLOCK) {
        if (sum_block(t, p->at, base, K, sum, bits) < 0) {
            memset(sum, 0, BLOCK * sizeof(double));
            if (!p->status) p->status = -1;  /* (an error already met stands: the one pass's answer) */
            return;
        }
        for (int wi = 0; wi < BLOCK / 64; wi++) {
            for (uint64_t x = bits[wi]; x; x &= x - 1) {
                int j = wi * 64 + __builtin_ctzll(x);
                double s = sum[j];
                sum[j] = 0.0;
                if (s < p->pool.bar || s == 0.0 || p->status) continue;  /* (most matches end here) */
                if (p->pool.k > 0) {
                    if (pool_add(&p->pool, base + j, s) < 0) p->status = -2;
                } else if (p->found >= p->room) {
                    p->status = -3;
                } else {
                    p->out[p->found] = base + j;
                    p->sc[p->found++] = s;
                }
            }
            bits[wi] = 0;
        }
    }
}

/* A pass of many postings is shared with the kernel's worker thread (when it is idle): this
 * thread sums the blocks below a split, the worker those from it on, each in its own buffer,
 * and their matches are joined in document order, so the sums and the choice among ties are
 * those of one pass. A worker that has not started when this thread is done is not waited
 * for: this thread sums its blocks too. */
#define SPLIT_MIN 65536  /* (postings: fewer cost less than handing half of them over) */
static double worker_sums[BLOCK];  /* (the other half's buffer: one pass at a time is shared, its caller
                                    * holding the GIL until the worker is done with it) */
typedef struct {
    const Terms *t;
    const float *K;
    Part *part;
    int64_t from, to;
    int started, done;
} Split;
static int split_possible(void);        /* whether the kernel has a worker thread on this build */
static int split_hand_over(Split *sp);  /* 1: the worker will sum it, or has; 0: it is the caller's */
static int split_taken(Split *sp);      /* 1: the worker took it (and is done now); 0: it never will */

/* The block boundary from which on about half the postings lie (none: -1). */
static int64_t split_at(const Terms *t, int64_t start, int64_t end, Py_ssize_t total) {
    int64_t lo = start / BLOCK + 1, hi = end / BLOCK - 1;  /* (each side at least one block) */
    if (lo > hi) return -1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        Py_ssize_t below = 0;
        for (Py_ssize_t p = 0; p < t->n; p++) below += first_at(t, p, mid * BLOCK);
        if (2 * below < total) lo = mid + 1; else hi = mid;
    }
    return lo * BLOCK;
}

static int part_init(Part *p, Py_ssize_t n_terms, Py_ssize_t k, double floor_, double *sum) {
    p->pool.k = k;
    p->pool.cap = 4 * k + 64;
    p->pool.bar = floor_;
    p->pool.e = malloc(p->pool.cap * sizeof(Held));
    p->pool.scratch = malloc(p->pool.cap * sizeof(double));
    p->at = calloc(n_terms + 1, sizeof(Py_ssize_t));
    p->sum = sum;
    return p->pool.e && p->pool.scratch && p->at ? 0 : -1;
}

static void part_free(Part *p) { free(p->pool.e); free(p->pool.scratch); free(p->at); }

/* best_sums(docs, tfs, weights, norm, k, floor, matched, scores) -> number kept, or -1.
 * docs[i] (int32, ascending) and tfs[i] (float32) are one term's postings (or one part of
 * them), weights[i] its (qtf·idf)·(k1 + 1); each posting adds part_of to its memory's sum (norm
 * float32), the parts in the order given, which is numpy.bincount's over them joined. The
 * matches (a sum other than 0) whose sum is at least `floor`, or with k > 0 only the k best of
 * them (a tie to the lower document): into matched (int64, ascending) and scores (float64).
 * With k 0 and no floor, every match (what kernels.accumulate returns). A match below the bar
 * (the floor, or the k-th best of a Pool) is passed over in one comparison: the few kept are
 * written, not every match. -1, having kept nothing: a term's documents out of order or a
 * weight not a number (numpy's turn). An optional last argument false: never shared with the
 * worker. */
static PyObject *best_sums(PyObject *self, PyObject *args) {
    PyObject *docs_list, *tfs_list, *weights_list, *norm_obj, *matched_obj, *scores_obj;
    Py_ssize_t k;
    double floor_;
    int may_split = 1;
    if (!PyArg_ParseTuple(args, "OOOOndOO|p", &docs_list, &tfs_list, &weights_list, &norm_obj, &k, &floor_,
                          &matched_obj, &scores_obj, &may_split))
        return NULL;
    Buf norm = {0}, scores = {0}, matched = {0};
    Terms t = {0};
    Part mine = {0}, theirs = {0};
    Split sp = {0};
    Py_ssize_t found = 0;
    const char *error = NULL;
    int failed = 0;
    if (take(norm_obj, &norm, 0, 'f') < 0 || take(matched_obj, &matched, 1, 'q') < 0
        || take(scores_obj, &scores, 1, 'd') < 0
        || load_terms(docs_list, tfs_list, weights_list, count(&norm, 4), 0, &t) < 0)
        goto fail;
    int usable = t.sorted;
    for (Py_ssize_t p = 0; usable && p < t.n; p++) usable = !isnan(t.w[p]);
    if (!usable) {  /* (numpy's turn) */
        found = -1;
        goto done;
    }
    if (k < 0 || isnan(floor_)) { error = "k must be at least 0 and the floor a number"; goto fail; }
    Py_ssize_t room = count(&matched, 8);
    if (count(&scores, 8) < room) room = count(&scores, 8);
    if (k > 0 && room < k) { error = "`matched` holds fewer than k"; goto fail; }
    if (part_init(&mine, t.n, k, floor_, block_sums) < 0) { PyErr_NoMemory(); goto fail; }
    mine.out = matched.view.buf;
    mine.sc = scores.view.buf;
    mine.room = room;
    const float *K = norm.view.buf;
    int64_t start = t.first < 0 ? 0 : t.first - t.first % BLOCK, end = t.first < 0 ? 0 : t.last + 1;
    Py_ssize_t total = 0;
    for (Py_ssize_t p = 0; p < t.n; p++) total += t.len[p];
    int64_t split = may_split && total >= SPLIT_MIN && split_possible() ? split_at(&t, start, end, total) : -1;
    int shared = 0;
    if (split > 0) {
        if (part_init(&theirs, t.n, k, floor_, worker_sums) < 0) { PyErr_NoMemory(); goto fail; }
        theirs.room = k > 0 ? 0 : room;
        theirs.out = k > 0 ? NULL : malloc((room ? room : 1) * sizeof(int64_t));
        theirs.sc = k > 0 ? NULL : malloc((room ? room : 1) * sizeof(double));
        if (k == 0 && (!theirs.out || !theirs.sc)) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t p = 0; p < t.n; p++) theirs.at[p] = first_at(&t, p, split);
        sp = (Split){.t = &t, .K = K, .part = &theirs, .from = split, .to = end};
        shared = split_hand_over(&sp);
    }
    sum_blocks(&t, K, &mine, start, split > 0 ? split : end);
    if (split > 0) {
        if (!shared || !split_taken(&sp)) sum_blocks(&t, K, &theirs, split, end);
        for (Py_ssize_t p = 0; p < t.n; p++)  /* (this thread read each term up to where the other began) */
            if (mine.at[p] != first_at(&t, p, split) && !mine.status) mine.status = -1;
        if (!mine.status) mine.status = theirs.status;
    }
    Part *last = split > 0 ? &theirs : &mine;
    if (mine.status == -2) { PyErr_NoMemory(); goto fail; }
    if (mine.status == -3) { error = "more matches than `matched` holds"; goto fail; }
    if (mine.status == -1 || !read_all(&t, last->at)) goto unordered;
    if (k > 0) {
        /* (the worker's few offered after this thread's, in document order, as one pass offers them) */
        for (Py_ssize_t i = 0; i < theirs.pool.n; i++) {
            Held h = theirs.pool.e[i];
            if (h.sum >= mine.pool.bar && pool_add(&mine.pool, h.doc, h.sum) < 0) { PyErr_NoMemory(); goto fail; }
        }
        found = pool_best(&mine.pool);
        for (Py_ssize_t i = 0; i < found; i++) { mine.out[i] = mine.pool.e[i].doc; mine.sc[i] = mine.pool.e[i].sum; }
    } else {
        found = mine.found;
        if (found + theirs.found > room) { error = "more matches than `matched` holds"; goto fail; }
        memcpy(mine.out + found, theirs.out, theirs.found * sizeof(int64_t));
        memcpy(mine.sc + found, theirs.sc, theirs.found * sizeof(double));
        found += theirs.found;
    }
done:
    drop_terms(&t);
    part_free(&mine); part_free(&theirs);
    free(theirs.out); free(theirs.sc);
    give(&norm); give(&scores); give(&matched);
    return failed ? NULL : PyLong_FromSsize_t(found);
unordered:  /* (numpy's turn, nothing kept) */
    found = -1;
    goto done;
fail:
    if (error) PyErr_SetString(PyExc_ValueError, error);
    failed = 1;
    goto done;
}

/* sums_at(docs, tfs, weights, norm, at, out) -> None, or -1: the BM25 of each memory of `at`
 * (int64, any order) into out (float64), `sum_at`'s sum (0 where no term holds it). -1: a
 * term's documents out of order (numpy's turn). */
static PyObject *sums_at(PyObject *self, PyObject *args) {
    PyObject *docs_list, *tfs_list, *weights_list, *norm_obj, *at_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &docs_list, &tfs_list, &weights_list, &norm_obj, &at_obj, &out_obj))
        return NULL;
    Buf norm = {0}, at = {0}, out = {0};
    Terms t = {0};
    PyObject *result = NULL;
    if (take(norm_obj, &norm, 0, 'f') < 0 || take(at_obj, &at, 0, 'q') < 0 || take(out_obj, &out, 1, 'd') < 0
        || load_terms(docs_list, tfs_list, weights_list, count(&norm, 4), 1, &t) < 0)
        goto end;
    Py_ssize_t n = count(&at, 8);
    if (count(&out, 8) < n) {
        PyErr_SetString(PyExc_ValueError, "`out` is shorter than `at`");
        goto end;
    }
    if (!t.sorted) {
        result = PyLong_FromLong(-1);
        goto end;
    }
    const int64_t *a = at.view.buf;
    double *o = out.view.buf;
    Py_ssize_t n_norm = count(&norm, 4);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (a[i] < 0 || a[i] >= n_norm) {
            PyErr_SetString(PyExc_IndexError, "a memory asked about is outside the arrays");
            goto end;
        }
        o[i] = sum_at(&t, (int32_t)a[i], norm.view.buf);
    }
    result = PyLong_FromLong(0);
end:
    drop_terms(&t);
    give(&norm); give(&at); give(&out);
    return result;
}

/* bounds(own, raw, recency_base, revision, updated, out, idf_max, neg_ln2, context_factor,
 *        w_relevance, recency_scale, w_recency, revision_cap, w_revision, lift, gate_after,
 *        gram_weight, gate_relevance)
 * Per match (own, int64; raw, its BM25, float64): 1 − (1 − rel)·context_factor with
 * rel = 1 − exp(neg_ln2·raw / idf_max) (0 when idf_max <= 0), times w_relevance, plus
 * w_recency·min(1, rb·scale) plus w_revision·min(revision, cap)/cap plus lift: kernels.bounds's
 * steps. With gate_after not NaN, a match updated before it whose relevance + gram_weight stays
 * under gate_relevance by more than BOUND_SLACK is −inf. A bound only has to be at least the
 * score: exp is the cheaper of the C library's two, and what it and numpy's own exp and expm1
 * differ by (a few units of 1e-16) is far inside the slack a score's bar leaves
 * (fusion._can_reach: 1e-12). */
#define BOUND_SLACK 1e-12
static PyObject *bounds(PyObject *self, PyObject *args) {
    PyObject *own_o, *raw_o, *rb_o, *rev_o, *upd_o, *out_o;
    double idf_max, neg_ln2, cfac, w_rel, rscale, w_rec, w_rev, lift, after, wg, gate;
    long cap;
    if (!PyArg_ParseTuple(args, "OOOOOOddddddlddddd", &own_o, &raw_o, &rb_o, &rev_o, &upd_o, &out_o, &idf_max,
                          &neg_ln2, &cfac, &w_rel, &rscale, &w_rec, &cap, &w_rev, &lift, &after, &wg, &gate))
        return NULL;
    Buf own = {0}, raw = {0}, rb = {0}, rev = {0}, upd = {0}, out = {0};
    if (take(own_o, &own, 0, 'q') < 0 || take(raw_o, &raw, 0, 'd') < 0 || take(rb_o, &rb, 0, 'd') < 0
        || take(rev_o, &rev, 0, 'i') < 0 || take(upd_o, &upd, 0, 'd') < 0 || take(out_o, &out, 1, 'd') < 0)
        goto fail;
    Py_ssize_t n = count(&own, 8), limit = count(&rb, 8);
    if (count(&rev, 4) < limit) limit = count(&rev, 4);
    if (count(&upd, 8) < limit) limit = count(&upd, 8);
    if (count(&out, 8) < n || count(&raw, 8) < n) {
        PyErr_SetString(PyExc_ValueError, "`raw` or `out` is shorter than `own`");
        goto fail;
    }
    const int64_t *o = own.view.buf;
    const double *r = raw.view.buf, *base = rb.view.buf, *u = upd.view.buf;
    const int32_t *rv = rev.view.buf;
    double *b = out.view.buf;
    int gated = !isnan(after);
    double capf = (double)cap;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d = o[i];
        if (d < 0 || d >= limit) {
            PyErr_SetString(PyExc_IndexError, "a match is outside the arrays");
            goto fail;
        }
        double rel = idf_max > 0 ? 1.0 - exp(neg_ln2 * r[i] / idf_max) : 0.0;
        double x = 1.0 - rel;
        x = x * cfac;
        x = 1.0 - x;
        int out_of_gate = gated && u[d] < after && x + wg + BOUND_SLACK < gate;
        x = x * w_rel;
        double rec = base[d] * rscale;
        rec = rec < 1.0 ? rec : 1.0;
        rec = rec * w_rec;
        double rvs = (double)(rv[d] < cap ? rv[d] : cap) / capf;
        rvs = rvs * w_rev;
        rec = rec + rvs;
        x = x + rec;
        x = x + lift;
        b[i] = out_of_gate ? -INFINITY : x;
    }
    give(&own); give(&raw); give(&rb); give(&rev); give(&upd); give(&out);
    Py_RETURN_NONE;
fail:
    give(&own); give(&raw); give(&rb); give(&rev); give(&upd); give(&out);
    return NULL;
}

typedef struct {
    const double *v;
    const int64_t *id;
} Entries;

/* Whether entry i ranks below entry j: a lower value, or the same value and a higher id. */
static inline int below(const Entries *e, int64_t i, int64_t j) {
    return e->v[i] < e->v[j] || (e->v[i] == e->v[j] && e->id[i] > e->id[j]);
}

static void sift_down(int64_t *heap, Py_ssize_t size, Py_ssize_t at, const Entries *e) {
    for (;;) {
        Py_ssize_t l = 2 * at + 1, worst = at;
        if (l < size && below(e, heap[l], heap[worst])) worst = l;
        if (l + 1 < size && below(e, heap[l + 1], heap[worst])) worst = l + 1;
        if (worst == at) return;
        int64_t t = heap[at]; heap[at] = heap[worst]; heap[worst] = t;
        at = worst;
    }
}

/* The k best of n entries into heap[0:k], best first: one pass with a heap of the best so
 * far, whose worst most entries fail to beat, then the heap sorted. */
static void choose(const Entries *e, Py_ssize_t n, int64_t *heap, Py_ssize_t k) {
    if (k <= 0) return;
    for (Py_ssize_t i = 0; i < k; i++) heap[i] = i;
    for (Py_ssize_t i = k / 2; i-- > 0;) sift_down(heap, k, i, e);
    double worst = e->v[heap[0]];  /* (most entries fail on this one comparison) */
    for (Py_ssize_t i = k; i < n; i++) {
        if (e->v[i] >= worst && below(e, heap[0], i)) {
            heap[0] = i;
            sift_down(heap, k, 0, e);
            worst = e->v[heap[0]];
        }
    }
    for (Py_ssize_t size = k; size > 1; size--) {  /* the worst to the back: best first */
        int64_t t = heap[0]; heap[0] = heap[size - 1]; heap[size - 1] = t;
        sift_down(heap, size - 1, 0, e);
    }
}

/* best(values, ids, out) -> k: the positions of the len(out) highest values (float64), ties
 * to the lower id (int64), best first, in out (int64); k = min(len(out), len(values)). */
static PyObject *best(PyObject *self, PyObject *args) {
    PyObject *v_o, *id_o, *out_o;
    if (!PyArg_ParseTuple(args, "OOO", &v_o, &id_o, &out_o)) return NULL;
    Buf vb = {0}, ib = {0}, ob = {0};
    if (take(v_o, &vb, 0, 'd') < 0 || take(id_o, &ib, 0, 'q') < 0 || take(out_o, &ob, 1, 'q') < 0) goto fail;
    Py_ssize_t n = count(&vb, 8), k = count(&ob, 8);
    if (count(&ib, 8) != n) {
        PyErr_SetString(PyExc_ValueError, "values and ids differ in length");
        goto fail;
    }
    Entries e = {vb.view.buf, ib.view.buf};
    choose(&e, n, ob.view.buf, k > n ? n : k);
    give(&vb); give(&ib); give(&ob);
    return PyLong_FromSsize_t(k > n ? n : k);
fail:
    give(&vb); give(&ib); give(&ob);
    return NULL;
}

/* gram_dots(docs, start, stop, base_grams, base_w, grams, w, base_used, query_ids, query_w, out)
 * The 3-gram channel's dot products: for each memory of docs (int64), its entries
 * start[doc]..stop[doc] (int64 positions: below base_used in base_grams/base_w, the rest in
 * grams/w at position − base_used; ids int32, weights float32), the sum, in entry order, of
 * weight · query_w[i] over the entries whose id is query_ids[i] (int64, ascending): what
 * ngrams.GramStore.cosine's bincount sums. */
static PyObject *gram_dots(PyObject *self, PyObject *args) {
    PyObject *o[10];
    Py_ssize_t base_used;
    if (!PyArg_ParseTuple(args, "OOOOOOOnOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &base_used, &o[7],
                          &o[8], &o[9]))
        return NULL;
    Buf b[10];
    memset(b, 0, sizeof b);
    const char kinds[10] = {'q', 'q', 'q', 'i', 'f', 'i', 'f', 'q', 'd', 'd'};
    for (int i = 0; i < 10; i++)
        if (take(o[i], &b[i], i == 9, kinds[i]) < 0) goto fail;
    const int64_t *docs = b[0].view.buf, *start = b[1].view.buf, *stop = b[2].view.buf, *qid = b[7].view.buf;
    const int32_t *g0 = b[3].view.buf, *g1 = b[5].view.buf;
    const float *w0 = b[4].view.buf, *w1 = b[6].view.buf;
    const double *qw = b[8].view.buf;
    double *out = b[9].view.buf;
    Py_ssize_t n = count(&b[0], 8), nd = count(&b[1], 8), nq = count(&b[7], 8);
    Py_ssize_t n0 = count(&b[3], 4), n1 = count(&b[5], 4);
    if (count(&b[2], 8) != nd || count(&b[4], 4) != n0 || count(&b[6], 4) != n1 || count(&b[8], 8) != nq
        || count(&b[9], 8) < n || base_used < 0 || base_used > n0) {
        PyErr_SetString(PyExc_ValueError, "the arrays' lengths do not fit together");
        goto fail;
    }
    /* (a bit per id modulo 2^16 that some query id has: most entries' ids are none of the
     * question's, and the bit says so without the binary search) */
    uint64_t some[1024];
    memset(some, 0, sizeof some);
    for (Py_ssize_t k = 0; k < nq; k++) some[(qid[k] & 0xFFFF) >> 6] |= 1ULL << (qid[k] & 63);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d = docs[i];
        if (d < 0 || d >= nd || start[d] < 0 || stop[d] > base_used + n1 || start[d] > stop[d]) {
            PyErr_SetString(PyExc_IndexError, "a memory or its entries are outside the arrays");
            goto fail;
        }
        /* (the memories' entries lie far apart: ask for those of the next few while these are
         * summed, so their misses overlap) */
        if (i + 8 < n && docs[i + 8] >= 0 && docs[i + 8] < nd) {
            __builtin_prefetch(start + docs[i + 8]);
            __builtin_prefetch(stop + docs[i + 8]);
        }
        if (i + 2 < n && docs[i + 2] >= 0 && docs[i + 2] < nd) {
            int64_t a = start[docs[i + 2]];
            if (a >= 0 && a < base_used) { __builtin_prefetch(g0 + a); __builtin_prefetch(w0 + a); }
        }
        double sum = 0.0;
        for (int64_t j = start[d]; j < stop[d]; j++) {
            int64_t g = j < base_used ? g0[j] : g1[j - base_used];
            if (!(some[(g & 0xFFFF) >> 6] >> (g & 63) & 1)) continue;
            Py_ssize_t lo = 0, hi = nq;  /* (the first query id not below g) */
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (qid[mid] < g) lo = mid + 1; else hi = mid;
            }
            if (lo < nq && qid[lo] == g) sum += (double)(j < base_used ? w0[j] : w1[j - base_used]) * qw[lo];
        }
        out[i] = sum;
    }
    for (int i = 0; i < 10; i++) give(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < 10; i++) give(&b[i]);
    return NULL;
}

/* Wide vectors where the CPU has them: a copy of the function for AVX2 and one for any x86-64,
 * chosen when the module loads (GCC on Linux; elsewhere the one plain build). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIDE __attribute__((target_clones("avx2", "default")))
#else
#define WIDE
#endif
/* What a cosine worked out in float32 (`row_dot`, a unit row and question of up to a few
 * thousand numbers) can differ from the exact product by, and more: the codes' bound adds it. */
#define NEAR_MARGIN 1e-4

#if defined(__GNUC__)  /* (what a WIDE function calls is built into each of its copies) */
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* One row's dot product with the query in one fixed order: lane k % 32 of 32 float32 partial
 * sums takes x[k]·q[k] in turn (a tail past the last 32 goes to lanes 0, 1, ...); lane l < 8
 * then adds lanes l + 8, l + 16 and l + 24 as (l + (l + 8)) + ((l + 16) + (l + 24)), and those
 * eight are added pairwise. (Four vector registers of partial sums: a cell's rows stream at
 * the memory's speed, where one register waited on its own additions.) Wide or narrow, and
 * numpy's loop in core/kernels.py, add in this order: a cosine is the same to the last bit
 * wherever it is worked out. */
INLINE float row_dot(const float *x, const float *q, Py_ssize_t d) {
    float s[32] = {0};
    Py_ssize_t k = 0;
#if defined(__GNUC__)  /* (the same sums in four registers of eight: the lanes' order is the loop's below) */
    typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
    v8 a = {0}, b = {0}, c = {0}, e = {0};
    for (; k + 32 <= d; k += 32) {
        a += *(const v8 *)(x + k) * *(const v8 *)(q + k);
        b += *(const v8 *)(x + k + 8) * *(const v8 *)(q + k + 8);
        c += *(const v8 *)(x + k + 16) * *(const v8 *)(q + k + 16);
        e += *(const v8 *)(x + k + 24) * *(const v8 *)(q + k + 24);
    }
    memcpy(s, &a, sizeof a);
    memcpy(s + 8, &b, sizeof b);
    memcpy(s + 16, &c, sizeof c);
    memcpy(s + 24, &e, sizeof e);
#else
    for (; k + 32 <= d; k += 32)
        for (int l = 0; l < 32; l++) s[l] += x[k + l] * q[k + l];
#endif
    for (int l = 0; k < d; k++, l++) s[l] += x[k] * q[k];
    for (int l = 0; l < 8; l++) s[l] = (s[l] + s[l + 8]) + (s[l + 16] + s[l + 24]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

WIDE static void runs_dots(const float *data, Py_ssize_t d, const int64_t *first, const int64_t *len,
                           Py_ssize_t runs, const float *q, float *out) {
    for (Py_ssize_t r = 0; r < runs; r++) {
        const float *x = data + first[r] * d;
        for (int64_t i = 0, n = len ? len[r] : 1; i < n; i++, x += d) *out++ = row_dot(x, q, d);
    }
}

/* How many rows the runs name (first[r] .. first[r] + len[r] − 1; len NULL: one row each), or
 * -1 with an IndexError where one is outside the `rows` there are. */
static Py_ssize_t rows_in_runs(const int64_t *first, const int64_t *len, Py_ssize_t runs, Py_ssize_t rows) {
    Py_ssize_t total = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        int64_t n = len ? len[r] : 1;
        if (first[r] < 0 || n < 0 || first[r] + n > rows) {
            PyErr_SetString(PyExc_IndexError, "a row is outside the array");
            return -1;
        }
        total += n;
    }
    return total;
}

/* dots(data, first, len, query, out) -> None: the dot products with query (float32, d) of rows
 * of data (float32, C-ordered rows of d, read-only is fine), run after run: rows first[r] ..
 * first[r] + len[r] − 1 (int64; len None: one row each), into out (float32) in that order. The
 * meaning channel's cosines: a cell's rows read straight through, or a few rows by slot,
 * without copying them out first. */
static PyObject *dots(PyObject *self, PyObject *args) {
    PyObject *data_obj, *first_obj, *len_obj, *q_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &data_obj, &first_obj, &len_obj, &q_obj, &out_obj)) return NULL;
    Buf data = {0}, first = {0}, len = {0}, q = {0}, out = {0};
    int has_len = len_obj != Py_None;
    const char *error = NULL;
    if (take_dims(data_obj, &data, 0, 'f', 2) < 0 || take(first_obj, &first, 0, 'q') < 0
        || (has_len && take(len_obj, &len, 0, 'q') < 0) || take(q_obj, &q, 0, 'f') < 0
        || take(out_obj, &out, 1, 'f') < 0)
        goto fail;
    Py_ssize_t d = count(&q, 4), runs = count(&first, 8);
    if (data.view.shape[1] != d) {
        error = "data must be a two-dimensional float32 array with rows as long as the query";
        goto fail;
    }
    if (has_len && count(&len, 8) != runs) { error = "first and len differ in length"; goto fail; }
    const int64_t *f = first.view.buf, *l = has_len ? len.view.buf : NULL;
    Py_ssize_t total = rows_in_runs(f, l, runs, data.view.shape[0]);
    if (total < 0) goto fail;
    if (count(&out, 4) < total) { error = "out holds fewer than the rows asked for"; goto fail; }
    runs_dots(data.view.buf, d, f, l, runs, q.view.buf, out.view.buf);
    give(&data); give(&first); give(&len); give(&q); give(&out);
    Py_RETURN_NONE;
fail:
    if (error) PyErr_SetString(PyExc_ValueError, error);
    give(&data); give(&first); give(&len); give(&q); give(&out);
    return NULL;
}

/* A row's int8 codes: each number over the row's scale (its largest magnitude / 127), rounded;
 * what the codes leave out is bounded by `slack_a` (the row's norm plus the error's) and
 * `slack_b` (the error's norm), both rounded up. */
static void quantize_row(const float *x, Py_ssize_t d, int8_t *c, float *scale, float *slack_a, float *slack_b) {
    float m = 0.0f;
    for (Py_ssize_t k = 0; k < d; k++) m = fabsf(x[k]) > m ? fabsf(x[k]) : m;
    double err = 0.0, norm = 0.0;
    float s = m / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (Py_ssize_t k = 0; k < d; k++) {
        float y = x[k] * inv;  /* (the codes need not be the nearest: the slacks measure the ones made) */
        int v = (int)(y + (y >= 0.0f ? 0.5f : -0.5f));
        c[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        double e = (double)x[k] - (double)s * c[k];
        err += e * e;
        norm += (double)x[k] * x[k];
    }
    err = sqrt(err);
    *scale = s;
    *slack_a = nextafterf((float)(sqrt(norm) + err), INFINITY);
    *slack_b = nextafterf((float)err, INFINITY);
}

/* quantize(data, codes, scale, slack_a, slack_b) -> None: the codes of the first rows of data
 * (float32 rows of d), as many as codes (int8, rows of d) has, and each row's scale and slacks
 * (float32). */
static PyObject *quantize(PyObject *self, PyObject *args) {
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Buf data = {0}, codes = {0}, v[3];
    memset(v, 0, sizeof v);
    const char *error = NULL;
    if (take_dims(o[0], &data, 0, 'f', 2) < 0 || take_dims(o[1], &codes, 1, 'b', 2) < 0) goto fail;
    for (int i = 0; i < 3; i++)
        if (take(o[2 + i], &v[i], 1, 'f') < 0) goto fail;
    if (codes.view.shape[1] != data.view.shape[1] || codes.view.shape[0] > data.view.shape[0]) {
        error = "codes must be rows as long as the data's, no more of them";
        goto fail;
    }
    Py_ssize_t n = codes.view.shape[0], d = data.view.shape[1];
    for (int i = 0; i < 3; i++)
        if (count(&v[i], 4) < n) { error = "scale and slacks hold fewer than the rows"; goto fail; }
    const float *x = data.view.buf;
    int8_t *c = codes.view.buf;
    float *sc = v[0].view.buf, *sa = v[1].view.buf, *sb = v[2].view.buf;
    for (Py_ssize_t r = 0; r < n; r++) quantize_row(x + r * d, d, c + r * d, sc + r, sa + r, sb + r);
    give(&data); give(&codes); for (int i = 0; i < 3; i++) give(&v[i]);
    Py_RETURN_NONE;
fail:
    if (error) PyErr_SetString(PyExc_ValueError, error);
    give(&data); give(&codes); for (int i = 0; i < 3; i++) give(&v[i]);
    return NULL;
}

/* The codes are read only where the CPU multiplies and adds 32 int8 pairs at a time (AVX2,
 * GCC or clang on x86-64): elsewhere one at a time costs more than the float32 rows'
 * bytes save, and the float32 rows are read instead (kernels.quantize gives no codes). */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#include <pthread.h>
#define CODES 1
#define NEAR_THREAD 1
__attribute__((target("avx2"))) static Py_ssize_t runs_near_avx2(
        const int8_t *codes, const float *scale, const float *sa, const float *sb, Py_ssize_t d, const int64_t *first,
        const int64_t *len, Py_ssize_t runs, const int8_t *q, double q_scale, double q_err, double q_norm,
        double cutoff, int64_t *out) {
    Py_ssize_t found = 0;
    const __m256i ones = _mm256_set1_epi16(1);
    for (Py_ssize_t r = 0; r < runs; r++)
        for (int64_t i = first[r], end = first[r] + len[r]; i < end; i++) {
            const int8_t *c = codes + i * d;
            __m256i acc = _mm256_setzero_si256();
            Py_ssize_t k = 0;
            /* 32 at a time: |q| (unsigned) times the row's codes with q's signs, in pairs of 16
             * bits (at most 2·127·127: `quantize` keeps codes within ±127, and a saved index's
             * codes are its checksums' to vouch for; a −128 would keep its sign), then in 32;
             * a tail past the last 32 one pair at a time */
            for (; k + 32 <= d; k += 32) {
                __m256i qk = _mm256_loadu_si256((const __m256i *)(q + k));
                __m256i ck = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(c + k)), qk);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(qk), ck), ones));
            }
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
            int32_t dot = _mm_cvtsi128_si32(h);
            for (; k < d; k++) dot += (int32_t)c[k] * q[k];
            double near = (double)scale[i] * q_scale * dot;
            if (near + (double)sa[i] * q_err + (double)sb[i] * q_norm + NEAR_MARGIN >= cutoff) out[found++] = i;
        }
    return found;
}

static int codes_fast(void) {  /* (asked once: each recall's call reads the answer) */
    static int fast = -1;
    if (fast < 0) {
        __builtin_cpu_init();
        fast = __builtin_cpu_supports("avx2") != 0;
    }
    return fast;
}
#else
static int codes_fast(void) { return 0; }
#endif

/* One call of near_codes: its arrays held until the rows are found. */
typedef struct {
    Buf codes, b[6], out;
    double q_scale, q_err, q_norm, cutoff;
    Py_ssize_t found;
    int pending;  /* (handed to the worker: waited for before the arrays are given back) */
    int done;
    int redo;  /* (in flight when the process forked: read by its caller) */
} Near;

static void near_find(Near *j) {
#ifdef CODES
    Py_ssize_t d = j->codes.view.shape[1], runs = count(&j->b[3], 8);
    j->found = runs_near_avx2(j->codes.view.buf, j->b[0].view.buf, j->b[1].view.buf, j->b[2].view.buf, d,
                              j->b[3].view.buf, j->b[4].view.buf, runs, j->b[5].view.buf, j->q_scale, j->q_err,
                              j->q_norm, j->cutoff, j->out.view.buf);
#endif
}

#ifdef NEAR_THREAD
/* One worker thread, started at the first pending search (or shared pass) and then asleep
 * between them: handing it a search costs the caller a wake-up, where a thread of its own cost
 * ~50 us to start. One search at a time: a second caller (another thread's recall) reads its
 * own rows. A pass's share is handed over only while no search is. */
static pthread_mutex_t near_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t near_wake = PTHREAD_COND_INITIALIZER, near_found = PTHREAD_COND_INITIALIZER;
static Near *near_job = NULL;  /* (handed over, not yet taken) */
static Near *near_current = NULL;  /* (handed over, not yet done: the worker is busy) */
static Split *split_job = NULL;  /* (a pass's share handed over, not yet taken or given back) */
static int near_up = 0;

static void *near_worker(void *unused) {
    pthread_mutex_lock(&near_lock);
    for (;;) {
        while (!near_job && !split_job) pthread_cond_wait(&near_wake, &near_lock);
        if (split_job) {
            Split *sp = split_job;
            split_job = NULL;
            sp->started = 1;
            pthread_mutex_unlock(&near_lock);
            sum_blocks(sp->t, sp->K, sp->part, sp->from, sp->to);
            pthread_mutex_lock(&near_lock);
            sp->done = 1;
            pthread_cond_broadcast(&near_found);
            continue;
        }
        Near *j = near_job;
        near_job = NULL;
        pthread_mutex_unlock(&near_lock);
        near_find(j);
        pthread_mutex_lock(&near_lock);
        j->done = 1;
        near_current = NULL;
        pthread_cond_broadcast(&near_found);
    }
    return NULL;
}

/* A fork takes the lock first (no one holds it while waiting for anything), so the child's copy
 * is its own to let go; the child has no worker: a search handed over and not yet done is read
 * by its caller, and the child starts a worker of its own. */
static void near_prepare(void) { pthread_mutex_lock(&near_lock); }
static void near_parent(void) { pthread_mutex_unlock(&near_lock); }
static void near_forked(void) {
    if (near_current) { near_current->pending = 0; near_current->redo = 1; }
    near_current = NULL;
    pthread_mutex_unlock(&near_lock);
    pthread_cond_init(&near_wake, NULL);
    pthread_cond_init(&near_found, NULL);
    near_job = NULL;
    split_job = NULL;
    near_up = 0;
}

static void start_worker(void) {  /* (with the lock held) */
    if (!near_up) {
        pthread_t t;
        if (pthread_create(&t, NULL, near_worker, NULL) == 0) {
            pthread_detach(t);
            near_up = 1;
        }
    }
}

/* A pass's share handed over only to an idle worker: with a search of the meaning channel's
 * under way (begun before the words' pass) the caller sums every block itself. The caller
 * holds the GIL until the share is given back, so no fork and no other search comes between. */
static int split_hand_over(Split *sp) {
    int handed = 0;
    pthread_mutex_lock(&near_lock);
    start_worker();
    if (near_up && !near_current && !near_job) {
        split_job = sp;
        handed = 1;
        pthread_cond_signal(&near_wake);
    }
    pthread_mutex_unlock(&near_lock);
    return handed;
}

static int split_taken(Split *sp) {
    pthread_mutex_lock(&near_lock);
    if (!sp->started) split_job = NULL;  /* (not begun: never will be) */
    else while (!sp->done) pthread_cond_wait(&near_found, &near_lock);
    int taken = sp->started;
    pthread_mutex_unlock(&near_lock);
    return taken;
}

static int near_hand_over(Near *j) {  /* 1: the worker reads it; 0: the caller must */
    int handed = 0;
    pthread_mutex_lock(&near_lock);
    start_worker();
    if (near_up && !near_current) {
        handed = j->pending = 1;
        near_current = j;
        near_job = j;
        pthread_cond_signal(&near_wake);
    }
    pthread_mutex_unlock(&near_lock);
    return handed;
}
#endif

#ifdef NEAR_THREAD
static int split_possible(void) { return 1; }
#else
static int split_possible(void) { return 0; }
static int split_hand_over(Split *sp) { return 0; }
static int split_taken(Split *sp) { return 0; }
#endif

/* The rows found (the worker waited for, without the GIL), its arrays given back; the call freed. */
static Py_ssize_t near_end(Near *j) {
#ifdef NEAR_THREAD
    if (j->pending) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&near_lock);
        while (!j->done) pthread_cond_wait(&near_found, &near_lock);
        pthread_mutex_unlock(&near_lock);
        Py_END_ALLOW_THREADS
        j->pending = 0;
    }
    if (j->redo) {
        j->redo = 0;
        Py_BEGIN_ALLOW_THREADS
        near_find(j);
        Py_END_ALLOW_THREADS
    }
#endif
    Py_ssize_t found = j->found;
    give(&j->codes); give(&j->out); for (int i = 0; i < 6; i++) give(&j->b[i]);
    PyMem_Free(j);
    return found;
}

static void near_dropped(PyObject *capsule) {  /* (a pending search never asked for its rows) */
    Near *j = PyCapsule_GetPointer(capsule, "slm_magic.near");
    if (j) near_end(j);
}

/* near_codes(codes, scale, slack_a, slack_b, first, len, q, q_scale, q_err, q_norm, cutoff, out, later)
 * -> how many: the rows of runs first[r] .. first[r] + len[r] − 1 (int64) whose cosine with the
 * question can reach the cutoff, by their codes (int8 rows of d; scale and slacks float32 by
 * row) and the question's (q int8 of d, its scale, the norm of what its codes leave out and its
 * own norm or more: `quantize`'s scale, slack_b and slack_a of it), into out (int64), in order. A row is left out only when its codes' product plus
 * the most the codes leave out (Cauchy-Schwarz on both sides, and NEAR_MARGIN for the float32
 * sum that works out the cosine itself) is below the cutoff: every row whose cosine reaches it
 * is among them. With `later` true, a pending search instead: the worker thread reads the
 * rows while the caller goes on (the words ranked meanwhile), and near_wait(pending) gives how
 * many; the arrays are held until then. Without the GIL either way. */
static PyObject *near_codes(PyObject *self, PyObject *args) {
    PyObject *o[8], *out_obj;
    double q_scale, q_err, q_norm, cutoff;
    int later;
    if (!PyArg_ParseTuple(args, "OOOOOOOddddOp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &q_scale, &q_err,
                          &q_norm, &cutoff, &out_obj, &later))
        return NULL;
    Near *j = PyMem_Calloc(1, sizeof(Near));
    if (!j) return PyErr_NoMemory();
    j->q_scale = q_scale; j->q_err = q_err; j->q_norm = q_norm; j->cutoff = cutoff;
    const char *error = NULL;
    if (take_dims(o[0], &j->codes, 0, 'b', 2) < 0) goto fail;
    const char kinds[6] = {'f', 'f', 'f', 'q', 'q', 'b'};
    for (int i = 0; i < 6; i++)
        if (take(o[1 + i], &j->b[i], 0, kinds[i]) < 0) goto fail;
    if (take(out_obj, &j->out, 1, 'q') < 0) goto fail;
    Py_ssize_t rows = j->codes.view.shape[0], d = j->codes.view.shape[1], runs = count(&j->b[3], 8);
    if (j->b[5].view.len != d) { error = "the question's codes must be as long as a row's"; goto fail; }
    if (count(&j->b[4], 8) != runs) { error = "first and len differ in length"; goto fail; }
    for (int i = 0; i < 3; i++)
        if (count(&j->b[i], 4) < rows) { error = "scale and slacks hold fewer than the rows"; goto fail; }
    Py_ssize_t total = rows_in_runs(j->b[3].view.buf, j->b[4].view.buf, runs, rows);
    if (total < 0) goto fail;
    if (count(&j->out, 8) < total) { error = "out holds fewer than the rows asked for"; goto fail; }
    if (!codes_fast()) { error = "this CPU reads no codes (kernels.CODES is False)"; goto fail; }
    int handed = 0;
#ifdef NEAR_THREAD
    handed = later && total > 0 && near_hand_over(j);
#endif
    if (!handed) {  /* (read here: a pending search then only gives the count) */
        Py_BEGIN_ALLOW_THREADS
        near_find(j);
        Py_END_ALLOW_THREADS
    }
    if (!later) return PyLong_FromSsize_t(near_end(j));
    PyObject *pending = PyCapsule_New(j, "slm_magic.near", near_dropped);
    if (!pending) near_end(j);
    return pending;
fail:
    if (error) PyErr_SetString(PyExc_ValueError, error);
    near_end(j);
    return NULL;
}

/* near_wait(pending) -> how many rows near_codes found into its out (once). */
static PyObject *near_wait(PyObject *self, PyObject *pending) {
    Near *j = PyCapsule_GetPointer(pending, "slm_magic.near");
    if (!j) return NULL;
    PyCapsule_SetDestructor(pending, NULL);
    PyCapsule_SetPointer(pending, (void *)pending);  /* (spent: a second wait is refused) */
    PyCapsule_SetName(pending, "slm_magic.near (spent)");
    return PyLong_FromSsize_t(near_end(j));
}

static PyObject *py_codes_fast(PyObject *self, PyObject *unused) { return PyBool_FromLong(codes_fast()); }

/* ---- The rows a recall shows: a page of memories read from their Arrow columns. ----
 * In Python each value cost about half a microsecond (a slice, two offsets, a decode), a page
 * of ten rows of eighteen columns 150-200 us. The columns are described once per chunk
 * (`row_reader`, from index/rows.page_reader), their buffers held by the reader; every read
 * is checked against its buffer's length. What is left of a page's time is mostly the misses
 * of its scattered rows (reading them ahead did not shorten it). */

enum { COL_NULL, COL_STR32, COL_STR64, COL_BOOL, COL_I32, COL_I64, COL_F64, COL_TS_US, COL_LIST_STR32 };

typedef struct {
    int kind;
    Py_ssize_t length, offset, child_offset;
    Buf valid, a, b, c, d;  /* validity; then by kind: offsets and data, the bits, the numbers; a list's
                             * offsets, its strings' validity, offsets and data */
} Column;

typedef struct {
    Py_ssize_t n;
    PyObject *names;  /* (a tuple of str, one per column) */
    Column cols[];
} RowReader;

/* The most a column's length or offsets may be: a value's place in bytes, (offset + row + 2)
 * times 8 at most, never overflows, so every check against a buffer's length holds. */
#define SPEC_MAX (PY_SSIZE_T_MAX / 64)

static void row_reader_free(PyObject *capsule) {
    RowReader *r = PyCapsule_GetPointer(capsule, "slm_magic.rows");
    if (!r) return;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        Column *c = &r->cols[i];
        give(&c->valid); give(&c->a); give(&c->b); give(&c->c); give(&c->d);
    }
    Py_XDECREF(r->names);
    PyMem_Free(r);
}

static int take_bytes(PyObject *obj, Buf *b) {  /* (None: no buffer, every value valid) */
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_SIMPLE) < 0) return -1;
    b->held = 1;
    return 0;
}

/* row_reader(names, specs) -> a reader: each spec (kind, length, offset, child offset,
 * validity, a, b, c, d), the buffers as Arrow lays out that kind of column (None: absent). */
static PyObject *row_reader(PyObject *self, PyObject *args) {
    PyObject *names, *specs;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &names, &PyList_Type, &specs)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (PyList_GET_SIZE(specs) != n) {
        PyErr_SetString(PyExc_ValueError, "one spec per name");
        return NULL;
    }
    RowReader *r = PyMem_Calloc(1, sizeof(RowReader) + n * sizeof(Column));
    if (!r) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(r, "slm_magic.rows", row_reader_free);
    if (!capsule) { PyMem_Free(r); return NULL; }
    Py_INCREF(names);
    r->names = names;
    for (Py_ssize_t i = 0; i < n; i++) {
        Column *c = &r->cols[i];
        PyObject *bufs[5];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, i), "innnOOOOO", &c->kind, &c->length, &c->offset,
                              &c->child_offset, &bufs[0], &bufs[1], &bufs[2], &bufs[3], &bufs[4])) goto fail;
        r->n = i + 1;
        if (c->kind < COL_NULL || c->kind > COL_LIST_STR32 || c->length < 0 || c->offset < 0 || c->child_offset < 0
            || c->length > SPEC_MAX || c->offset > SPEC_MAX || c->child_offset > SPEC_MAX) {
            PyErr_SetString(PyExc_ValueError, "a column's kind, length or offset is out of range");
            goto fail;
        }
        Buf *into[5] = {&c->valid, &c->a, &c->b, &c->c, &c->d};
        for (int k = 0; k < 5; k++)
            if (take_bytes(bufs[k], into[k]) < 0) goto fail;
    }
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

static inline int fits(const Buf *b, Py_ssize_t end) { return b->held && end >= 0 && end <= b->view.len; }

static inline int bit_set(const Buf *b, Py_ssize_t j, int *out) {  /* -1: out of the buffer */
    if (!fits(b, (j >> 3) + 1)) return -1;
    *out = (((const uint8_t *)b->view.buf)[j >> 3] >> (j & 7)) & 1;
    return 0;
}

static PyObject *out_of_buffer(void) {
    PyErr_SetString(PyExc_ValueError, "a row's value lies outside its column's buffers");
    return NULL;
}

static PyObject *string_at(const Buf *offsets, const Buf *data, Py_ssize_t j, int wide) {
    int64_t s, e;
    if (wide) {
        if (!fits(offsets, (j + 2) * 8)) return out_of_buffer();
        s = ((const int64_t *)offsets->view.buf)[j]; e = ((const int64_t *)offsets->view.buf)[j + 1];
    } else {
        if (!fits(offsets, (j + 2) * 4)) return out_of_buffer();
        s = ((const int32_t *)offsets->view.buf)[j]; e = ((const int32_t *)offsets->view.buf)[j + 1];
    }
    if (s < 0 || e < s || (e > s && !fits(data, e))) return out_of_buffer();
    return PyUnicode_DecodeUTF8(e > s ? (const char *)data->view.buf + s : "", e - s, "strict");
}

/* Days since 1970-01-01 as a civil date (proleptic Gregorian; H. Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static PyObject *timestamp_us(int64_t us) {  /* (naive, as 1970-01-01 + timedelta(microseconds=us)) */
    int64_t day = us / 86400000000LL, rem = us % 86400000000LL;
    if (rem < 0) { rem += 86400000000LL; day -= 1; }
    int64_t y;
    int m, d;
    civil_from_days(day, &y, &m, &d);
    if (y < 1 || y > 9999) {
        PyErr_SetString(PyExc_OverflowError, "a timestamp outside the years 1-9999");
        return NULL;
    }
    int64_t s = rem / 1000000;
    return PyDateTime_FromDateAndTime((int)y, m, d, (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60),
                                      (int)(rem % 1000000));
}

static const void *number_at(const Column *c, Py_ssize_t j, Py_ssize_t size) {  /* (NULL: out of its buffer) */
    if (!fits(&c->a, (j + 1) * size)) return out_of_buffer();
    return (const char *)c->a.view.buf + j * size;
}

static PyObject *value_at(const Column *c, Py_ssize_t i) {
    Py_ssize_t j = c->offset + i;
    if (c->kind == COL_NULL) Py_RETURN_NONE;
    if (c->valid.held) {
        int ok;
        if (bit_set(&c->valid, j, &ok) < 0) return out_of_buffer();
        if (!ok) Py_RETURN_NONE;
    }
    switch (c->kind) {
    case COL_STR32:
    case COL_STR64:
        return string_at(&c->a, &c->b, j, c->kind == COL_STR64);
    case COL_BOOL: {
        int bit;
        if (bit_set(&c->a, j, &bit) < 0) return out_of_buffer();
        return PyBool_FromLong(bit);
    }
    case COL_I32: { const int32_t *v = number_at(c, j, 4); return v ? PyLong_FromLong(*v) : NULL; }
    case COL_I64: { const int64_t *v = number_at(c, j, 8); return v ? PyLong_FromLongLong(*v) : NULL; }
    case COL_F64: { const double *v = number_at(c, j, 8); return v ? PyFloat_FromDouble(*v) : NULL; }
    case COL_TS_US: { const int64_t *v = number_at(c, j, 8); return v ? timestamp_us(*v) : NULL; }
    default: {  /* COL_LIST_STR32: a list of strings (None for a null one) */
        if (!fits(&c->a, (j + 2) * 4)) return out_of_buffer();
        int32_t s = ((const int32_t *)c->a.view.buf)[j], e = ((const int32_t *)c->a.view.buf)[j + 1];
        if (s < 0 || e < s || !fits(&c->c, (c->child_offset + (Py_ssize_t)e + 1) * 4)) return out_of_buffer();
        PyObject *list = PyList_New(e - s);
        if (!list) return NULL;
        for (int32_t k = s; k < e; k++) {
            Py_ssize_t kk = c->child_offset + k;
            PyObject *v;
            int ok = 1;
            if (c->b.held && bit_set(&c->b, kk, &ok) < 0) v = out_of_buffer();
            else if (!ok) { v = Py_None; Py_INCREF(v); }
            else v = string_at(&c->c, &c->d, kk, 0);
            if (!v) { Py_DECREF(list); return NULL; }
            PyList_SET_ITEM(list, k - s, v);
        }
        return list;
    }
    }
}

/* read_rows(reader, rows) -> one dict of the columns' values (by their names) per row. */
static PyObject *read_rows(PyObject *self, PyObject *args) {
    PyObject *capsule, *rows;
    if (!PyArg_ParseTuple(args, "OO!", &capsule, &PyList_Type, &rows)) return NULL;
    RowReader *r = PyCapsule_GetPointer(capsule, "slm_magic.rows");
    if (!r) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(rows, i));
        if (at == -1 && PyErr_Occurred()) goto fail;
        PyObject *row = PyDict_New();
        if (!row) goto fail;
        PyList_SET_ITEM(out, i, row);
        for (Py_ssize_t k = 0; k < r->n; k++) {
            const Column *c = &r->cols[k];
            if (at < 0 || at >= c->length) {
                PyErr_Format(PyExc_IndexError, "row %zd of a column of %zd", at, c->length);
                goto fail;
            }
            PyObject *v = value_at(c, at);
            if (!v) goto fail;
            int bad = PyDict_SetItem(row, PyTuple_GET_ITEM(r->names, k), v);
            Py_DECREF(v);
            if (bad < 0) goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"best_sums", best_sums, METH_VARARGS, "The memories whose BM25 reaches a floor, or the k best; the rest never written out."},
    {"sums_at", sums_at, METH_VARARGS, "The BM25 of some memories, each summed as the blocks sum it."},
    {"bounds", bounds, METH_VARARGS, "Each match's score bound (fusion._bounds)."},
    {"best", best, METH_VARARGS, "The positions of the highest values, ties to the lower id, best first."},
    {"gram_dots", gram_dots, METH_VARARGS, "The 3-gram channel's dot products of some memories with the query."},
    {"dots", dots, METH_VARARGS, "Rows' dot products with a query (the meaning channel's cosines), in one fixed order."},
    {"quantize", quantize, METH_VARARGS, "Rows' int8 codes, each row's scale and what the codes leave out."},
    {"codes_fast", py_codes_fast, METH_NOARGS, "Whether this CPU reads int8 codes faster than float32 rows."},
    {"near_codes", near_codes, METH_VARARGS, "The rows whose cosine can reach a cutoff, by their int8 codes."},
    {"near_wait", near_wait, METH_O, "How many rows a pending near_codes found, once its thread is done."},
    {"row_reader", row_reader, METH_VARARGS, "A reader of rows of some Arrow columns, their buffers held."},
    {"read_rows", read_rows, METH_VARARGS, "Some rows' values, a dict per row, read by a row_reader."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_kernels", .m_doc = NULL, .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
#ifdef NEAR_THREAD
    pthread_atfork(near_prepare, near_parent, near_forked);
#endif
    return PyModule_Create(&module);
}
