/* Progress-line template matching over a whole chunk, in one pass (optional accelerator).
 *
 * probes/logs/bulk.py learns a template from one progress line: fixed pieces of text with
 * runs of digits between them.  scan() walks the lines of a chunk, keeps those that are
 * exactly  piece0 digits piece1 digits ... pieceR  (every piece digit-free, so each run of
 * digits is maximal and the split is unique), and returns for them:
 *
 *   - the 0-based index of each matching line in the chunk, and its first byte's offset,
 *     (with ``segments``, a line that does not match whole may match with its last '\r'-separated
 *     segment, trailing '\r's left out, as the reader cuts a line at carriage returns: the offset
 *     is then the segment's, and only the segment is blanked),
 *   - one float64 per slot and line (a slot is a number of the template: one run for an
 *     integer, "run . run" for a decimal, up to four runs for an exponent form, or one run
 *     read as a fraction, 123 -> 0.123, for the sub-second digits of a timestamp),
 *   - a copy of the chunk with each matching line's bytes replaced by '\r' (newlines and so
 *     line numbers unchanged; '\r' never matches a prefilter keyword and strips to ""),
 *   - the chunk's newline count.
 *
 * Values equal Python's float() of the token: integers and decimals of at most 15 digits are
 * exact as mantissa / 10**k (one correctly rounded division, Clinger's fast path; a fraction
 * equals float("0." + digits) the same way); exponent
 * forms go through PyOS_string_to_double, the function float() uses.  A line whose number is
 * longer than that (or that fails to convert) is simply not matched: the caller reads it on
 * the line-by-line path.  Nothing here decides what a line means; bulk.learn verified the
 * template against the per-line parsers.
 *
 * keywords() is the keyword prefilter (prefilter.KernelPrefilter): where in a chunk the
 * alternation of literal keywords (and of literals followed by digits and a blank, the NCCL
 * return-code chain " -> 3") matches, as Python's re.finditer finds it.  Each keyword has an
 * anchor, one pair of adjacent bytes of it (prefilter.py picks the pair rarest in the log); a
 * 64 KiB table says which pairs are anchors, and one look-up per position, eight positions per
 * branch, skips almost all text.  Where an anchor's keyword really occurs, the line is matched
 * exactly, position by position, alternatives in order (leftmost, then first alternative).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_PIECES 256
#define MAX_SLOTS 64
#define MAX_DIGITS 15
#define MAX_EXP_TOKEN 24

enum { K_INT = 0, K_DEC = 1, K_EXP = 2, K_FRAC = 3 };

typedef struct {
    Py_ssize_t first, last; /* runs first..last (inclusive) make the token */
    int kind;
} slot_t;

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* One piece at p: exactly, or with ``flex`` its leading and trailing runs of spaces as any
 * run of spaces (numbers padded to a width, as in Megatron's "iteration     100/"); the end of
 * the piece in the line, or NULL. */
static const unsigned char *match_piece(const unsigned char *p, const unsigned char *e, const char *piece,
                                        Py_ssize_t n, int flex) {
    if (!flex) {
        if (e - p < n || (n && memcmp(p, piece, (size_t)n) != 0)) return NULL;
        return p + n;
    }
    Py_ssize_t i = 0, j = n;
    if (n && piece[0] == ' ') {
        while (i < n && piece[i] == ' ') i++;
        if (p >= e || *p != ' ') return NULL;
        while (p < e && *p == ' ') p++;
        if (i == n) return p;
    }
    while (j > i && piece[j - 1] == ' ') j--;
    if (e - p < j - i || memcmp(p, piece + i, (size_t)(j - i)) != 0) return NULL;
    p += j - i;
    if (j < n) {
        if (p >= e || *p != ' ') return NULL;
        while (p < e && *p == ' ') p++;
    }
    return p;
}

/* Match one line [s, e) against the pieces; fills run starts/ends.  1 on a match. */
static int match_line(const unsigned char *s, const unsigned char *e, const char *const *pieces,
                      const Py_ssize_t *plen, const Py_ssize_t *width, Py_ssize_t runs, const int *flex,
                      Py_ssize_t *rs, Py_ssize_t *re_, const unsigned char *base) {
    const unsigned char *p = s;
    for (Py_ssize_t i = 0; i <= runs; i++) {
        p = match_piece(p, e, pieces[i], plen[i], flex[i]);
        if (!p) return 0;
        if (i == runs) break;
        const unsigned char *q = p;
        while (q < e && is_digit(*q)) q++;
        if (q == p || (width[i] && q - p != width[i])) return 0;
        rs[i] = p - base;
        re_[i] = q - base;
        p = q;
    }
    return p == e;
}

static int digits_value(const unsigned char *p, Py_ssize_t n, long long *out) {
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) v = v * 10 + (p[i] - '0');
    *out = v;
    return 1;
}

/* float() of the n-byte token at s (PyOS_string_to_double, what float() uses); 0 if it is not one whole
 * number or longer than MAX_EXP_TOKEN */
static int token_double(const unsigned char *s, Py_ssize_t n, double *out) {
    char tmp[MAX_EXP_TOKEN + 1];
    char *end = NULL;
    if (n > MAX_EXP_TOKEN) return 0;
    memcpy(tmp, s, (size_t)n);
    tmp[n] = 0;
    double v = PyOS_string_to_double(tmp, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != tmp + n) return 0;
    *out = v;
    return 1;
}

/* The value of one slot, or 0 when the line must take the slow path. */
static int slot_value(const unsigned char *buf, const slot_t *sl, const Py_ssize_t *rs,
                      const Py_ssize_t *re_, const char *const *pieces, const Py_ssize_t *plen, double *out) {
    Py_ssize_t a = sl->first, b = sl->last;
    if (sl->kind == K_INT || sl->kind == K_FRAC) {
        Py_ssize_t n = re_[a] - rs[a];
        long long v;
        if (n > MAX_DIGITS) return 0;
        digits_value(buf + rs[a], n, &v);
        *out = sl->kind == K_INT ? (double)v : (double)v / POW10[n];
        return 1;
    }
    if (sl->kind == K_DEC) {
        Py_ssize_t ni = re_[a] - rs[a], nf = re_[b] - rs[b];
        long long vi, vf;
        if (ni + nf > MAX_DIGITS) return 0;
        digits_value(buf + rs[a], ni, &vi);
        digits_value(buf + rs[b], nf, &vf);
        *out = (double)(vi * (long long)POW10[nf] + vf) / POW10[nf];
        return 1;
    }
    {
        /* exponent form: int [. frac] e[+-] exp.  With at most 15 mantissa digits and a power of
         * ten up to 1e22 both values are exact doubles, so one multiplication or division is
         * correctly rounded (Clinger's fast path); anything else goes to PyOS_string_to_double. */
        Py_ssize_t ni = re_[a] - rs[a], nf = (b - a == 2) ? re_[a + 1] - rs[a + 1] : 0, ne = re_[b] - rs[b];
        if (b - a <= 2 && ni + nf <= MAX_DIGITS && ne <= 3) {
            long long vi, vf = 0, ve;
            digits_value(buf + rs[a], ni, &vi);
            if (nf) digits_value(buf + rs[a + 1], nf, &vf);
            digits_value(buf + rs[b], ne, &ve);
            if (memchr(pieces[b], '-', (size_t)plen[b])) ve = -ve; /* the piece before the exponent: "e-", "E+", "e" */
            long long net = ve - nf;
            double mant = (double)(vi * (long long)POW10[nf] + vf);
            if (net >= 0 && net <= 22) {
                *out = mant * POW10[net];
                return 1;
            }
            if (net < 0 && net >= -22) {
                *out = mant / POW10[-net];
                return 1;
            }
        }
        return token_double(buf + rs[a], re_[b] - rs[a], out);
    }
}

static PyObject *fastscan_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *pieces_obj, *slots_obj, *widths_obj = NULL, *flex_obj = NULL;
    int segments = 0;
    if (!PyArg_ParseTuple(args, "y*O!O!|O!O!p", &view, &PyTuple_Type, &pieces_obj, &PyTuple_Type, &slots_obj,
                          &PyTuple_Type, &widths_obj, &PyTuple_Type, &flex_obj, &segments))
        return NULL;
    PyObject *result = NULL, *idx_obj = NULL, *off_obj = NULL, *val_obj = NULL, *rest_obj = NULL;
    Py_ssize_t npieces = PyTuple_GET_SIZE(pieces_obj), nslots = PyTuple_GET_SIZE(slots_obj);
    const char *pieces[MAX_PIECES];
    Py_ssize_t plen[MAX_PIECES], width[MAX_PIECES], minlen = 0;
    int flex[MAX_PIECES];
    slot_t slots[MAX_SLOTS];
    Py_ssize_t rs[MAX_PIECES], re_[MAX_PIECES];
    long long *idx = NULL, *off = NULL;
    double *vals = NULL;

    if (npieces < 1 || npieces > MAX_PIECES || nslots > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "template too large");
        goto done;
    }
    Py_ssize_t runs = npieces - 1;
    if (widths_obj && PyTuple_GET_SIZE(widths_obj) != runs) {
        PyErr_SetString(PyExc_ValueError, "one width per run");
        goto done;
    }
    for (Py_ssize_t i = 0; i < runs; i++) {
        width[i] = widths_obj ? PyLong_AsSsize_t(PyTuple_GET_ITEM(widths_obj, i)) : 0;
        if (width[i] < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "widths must be >= 0");
            goto done;
        }
    }
    if (flex_obj && PyTuple_GET_SIZE(flex_obj) != npieces) {
        PyErr_SetString(PyExc_ValueError, "one flex flag per piece");
        goto done;
    }
    for (Py_ssize_t i = 0; i < npieces; i++) {
        flex[i] = flex_obj ? PyObject_IsTrue(PyTuple_GET_ITEM(flex_obj, i)) : 0;
        if (flex[i] < 0) goto done;
        PyObject *p = PyTuple_GET_ITEM(pieces_obj, i);
        if (!PyBytes_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "pieces must be bytes");
            goto done;
        }
        pieces[i] = PyBytes_AS_STRING(p);
        plen[i] = PyBytes_GET_SIZE(p);
        for (Py_ssize_t j = 0; j < plen[i]; j++)
            if (is_digit((unsigned char)pieces[i][j]) || pieces[i][j] == '\n') {
                PyErr_SetString(PyExc_ValueError, "pieces must hold no digit or newline");
                goto done;
            }
        if (i > 0 && i < runs && plen[i] == 0) {
            PyErr_SetString(PyExc_ValueError, "inner pieces must not be empty");
            goto done;
        }
        Py_ssize_t shortest = plen[i];
        if (flex[i]) { /* the leading and trailing runs of spaces may shrink to one */
            Py_ssize_t a = 0, b = plen[i];
            while (a < b && pieces[i][a] == ' ') a++;
            while (b > a && pieces[i][b - 1] == ' ') b--;
            shortest = (b - a) + (a > 0) + (b < plen[i] && a < b ? 1 : 0);
        }
        minlen += shortest + (i < runs ? 1 : 0);
    }
    for (Py_ssize_t k = 0; k < nslots; k++) {
        Py_ssize_t a, b;
        int kind;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots_obj, k), "nni", &a, &b, &kind)) goto done;
        if (a < 0 || b < a || b >= runs || kind < K_INT || kind > K_FRAC || ((kind == K_INT || kind == K_FRAC) && a != b) ||
            (kind == K_DEC && b != a + 1) || (kind == K_EXP && (b == a || b > a + 2))) {
            PyErr_SetString(PyExc_ValueError, "bad slot");
            goto done;
        }
        slots[k].first = a;
        slots[k].last = b;
        slots[k].kind = kind;
    }

    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, cap = 1024, n = 0, newlines = 0;
    idx = PyMem_Malloc(sizeof(long long) * (size_t)cap);
    off = PyMem_Malloc(sizeof(long long) * (size_t)cap);
    vals = PyMem_Malloc(sizeof(double) * (size_t)(cap * (nslots ? nslots : 1)));
    rest_obj = PyBytes_FromStringAndSize((const char *)buf, len);
    if (!idx || !off || !vals || !rest_obj) {
        PyErr_NoMemory();
        goto done;
    }
    unsigned char *rest = (unsigned char *)PyBytes_AS_STRING(rest_obj);
    const unsigned char first = plen[0] ? (unsigned char)pieces[0][0] : 0;
    Py_ssize_t pos = 0;
    while (pos < len) {
        const unsigned char *nl = memchr(buf + pos, '\n', (size_t)(len - pos));
        Py_ssize_t end = nl ? nl - buf : len;
        if (!nl) break; /* an unterminated last line is left to the line-by-line path */
        Py_ssize_t s0 = pos, e0 = end;
        int hit = end - pos >= minlen && (!plen[0] || buf[pos] == first) &&
                  match_line(buf + pos, buf + end, pieces, plen, width, runs, flex, rs, re_, buf);
        if (!hit && segments && memchr(buf + pos, '\r', (size_t)(end - pos))) {
            /* the line's last carriage-return segment, as the line-by-line reader cuts it: a record
             * tqdm.write() printed after the bar's updates, or a CRLF line without its '\r' */
            while (e0 > pos && buf[e0 - 1] == '\r') e0--;
            s0 = e0;
            while (s0 > pos && buf[s0 - 1] != '\r') s0--;
            hit = e0 - s0 >= minlen && (!plen[0] || buf[s0] == first) &&
                  match_line(buf + s0, buf + e0, pieces, plen, width, runs, flex, rs, re_, buf);
        }
        if (hit) {
            if (n == cap) {
                cap *= 2;
                long long *i2 = PyMem_Realloc(idx, sizeof(long long) * (size_t)cap);
                if (!i2) { PyErr_NoMemory(); goto done; }
                idx = i2;
                long long *o2 = PyMem_Realloc(off, sizeof(long long) * (size_t)cap);
                if (!o2) { PyErr_NoMemory(); goto done; }
                off = o2;
                double *v2 = PyMem_Realloc(vals, sizeof(double) * (size_t)(cap * (nslots ? nslots : 1)));
                if (!v2) { PyErr_NoMemory(); goto done; }
                vals = v2;
            }
            int ok = 1;
            for (Py_ssize_t k = 0; k < nslots && ok; k++) ok = slot_value(buf, &slots[k], rs, re_, pieces, plen, &vals[n * nslots + k]);
            if (ok) {
                off[n] = s0;
                idx[n++] = newlines;
                memset(rest + s0, '\r', (size_t)(e0 - s0));
            }
        }
        newlines++;
        pos = end + 1;
    }
    idx_obj = PyBytes_FromStringAndSize((const char *)idx, (Py_ssize_t)sizeof(long long) * n);
    off_obj = PyBytes_FromStringAndSize((const char *)off, (Py_ssize_t)sizeof(long long) * n);
    val_obj = PyBytes_FromStringAndSize((const char *)vals, (Py_ssize_t)sizeof(double) * n * nslots);
    if (!idx_obj || !off_obj || !val_obj) goto done;
    result = Py_BuildValue("(OOOOn)", idx_obj, off_obj, val_obj, rest_obj, newlines);
done:
    Py_XDECREF(idx_obj);
    Py_XDECREF(off_obj);
    Py_XDECREF(val_obj);
    Py_XDECREF(rest_obj);
    PyMem_Free(idx);
    PyMem_Free(off);
    PyMem_Free(vals);
    PyBuffer_Release(&view);
    return result;
}

/* ---- the keyword prefilter ------------------------------------------------------------ */

#define MAX_KEYWORDS 1024
/* a keyword's tail (what follows its literal) and head (what precedes it), as bits of one code */
enum { T_NONE = 0, T_DIGITS_BLANK = 1, H_COLON_DIGITS = 2 };

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
    int tail;
    int head; /* ':' and digits+ before the literal (a source line "file.cc:47"): the match starts at ':' */
} kw_t;

/* two bytes as one index, in the machine's byte order (the table is built the same way) */
static inline unsigned pair_at(const unsigned char *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline int is_blank(unsigned char c) { /* re's \s for bytes: [ \t\n\r\f\v] */
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The end of keyword ``k``'s match at ``s`` in a buffer of ``len`` bytes, or -1 (a keyword holds no
 * newline, so a match never leaves its line; the tail's blank may be the line's newline). */
static Py_ssize_t kw_match(const unsigned char *buf, Py_ssize_t s, Py_ssize_t len, const kw_t *k) {
    if (k->head) { /* ':' then digits+ (maximal: the literal starts with a non-digit) */
        if (s >= len || buf[s] != ':' || s + 1 >= len || !is_digit(buf[s + 1])) return -1;
        s++;
        while (s < len && is_digit(buf[s])) s++;
    }
    if (len - s < k->n || memcmp(buf + s, k->s, (size_t)k->n) != 0) return -1;
    Py_ssize_t j = s + k->n;
    if (k->tail == T_NONE) return j;
    /* digits+ then \s or the end ($ without MULTILINE: the end of the buffer, or before its last
     * newline, where \s matches first); the run is maximal, a shorter one is followed by a digit */
    if (j >= len || !is_digit(buf[j])) return -1;
    while (j < len && is_digit(buf[j])) j++;
    if (j == len) return j;
    return is_blank(buf[j]) ? j + 1 : -1;
}

static PyObject *fastscan_keywords(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *kws_obj, *anchors_obj, *tails_obj;
    int first_only = 0;
    if (!PyArg_ParseTuple(args, "y*nO!O!O!|p", &view, &pos, &PyTuple_Type, &kws_obj, &PyTuple_Type, &anchors_obj,
                          &PyTuple_Type, &tails_obj, &first_only))
        return NULL;
    PyObject *result = NULL;
    long long *out = NULL;
    kw_t kws[MAX_KEYWORDS];
    /* per first byte, the keywords that start with it, in alternation order */
    short *by_first = NULL;
    Py_ssize_t nfirst[256], anchor[MAX_KEYWORDS];
    /* per anchor (two bytes), the keywords anchored there: a chain through ``next`` (index + 1) */
    unsigned short *head = NULL, next[MAX_KEYWORDS];
    unsigned char *tab = NULL; /* per pair of bytes: 1 where it is some keyword's anchor */
    Py_ssize_t nk = PyTuple_GET_SIZE(kws_obj);
    memset(nfirst, 0, sizeof nfirst);
    if (nk > MAX_KEYWORDS || PyTuple_GET_SIZE(anchors_obj) != nk || PyTuple_GET_SIZE(tails_obj) != nk) {
        PyErr_SetString(PyExc_ValueError, "one anchor and tail per keyword, at most 1024 keywords");
        goto done;
    }
    by_first = PyMem_Malloc(sizeof(short) * 256 * (size_t)(nk ? nk : 1));
    head = PyMem_Calloc(65536, sizeof(unsigned short));
    tab = PyMem_Calloc(65536, 1);
    if (!by_first || !head || !tab) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(kws_obj, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "keywords must be bytes");
            goto done;
        }
        kws[i].s = (const unsigned char *)PyBytes_AS_STRING(k);
        kws[i].n = PyBytes_GET_SIZE(k);
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(anchors_obj, i));
        long t = PyLong_AsLong(PyTuple_GET_ITEM(tails_obj, i));
        if (PyErr_Occurred()) goto done;
        if (kws[i].n < 2 || a < 0 || a + 2 > kws[i].n || t < 0 || t > (T_DIGITS_BLANK | H_COLON_DIGITS) ||
            memchr(kws[i].s, '\n', (size_t)kws[i].n) || ((t & H_COLON_DIGITS) && is_digit(kws[i].s[0]))) {
            PyErr_SetString(PyExc_ValueError, "a keyword has at least 2 bytes, no newline, its anchor inside");
            goto done;
        }
        kws[i].tail = (int)(t & T_DIGITS_BLANK);
        kws[i].head = (t & H_COLON_DIGITS) != 0;
        anchor[i] = a;
        unsigned v = pair_at(kws[i].s + a);
        tab[v] = 1;
        next[i] = head[v];
        head[v] = (unsigned short)(i + 1);
        unsigned char f = kws[i].head ? ':' : kws[i].s[0];
        by_first[f * nk + nfirst[f]++] = (short)i;
    }

    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, cap = 256, n = 0;
    if (pos < 0) pos = 0;
    out = PyMem_Malloc(sizeof(long long) * 2 * (size_t)cap);
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = pos;
    while (i + 1 < len) {
        while (i + 8 < len) { /* eight positions at a time while none is an anchor */
            const unsigned char *q = buf + i;
            if (tab[pair_at(q)] | tab[pair_at(q + 1)] | tab[pair_at(q + 2)] | tab[pair_at(q + 3)] |
                tab[pair_at(q + 4)] | tab[pair_at(q + 5)] | tab[pair_at(q + 6)] | tab[pair_at(q + 7)])
                break;
            i += 8;
        }
        unsigned v = pair_at(buf + i);
        if (!tab[v]) {
            i++;
            continue;
        }
        /* an anchor: does one of its keywords match here?  Only then is the line matched exactly */
        int hit = 0;
        for (unsigned short k = head[v]; k && !hit; k = next[k - 1]) {
            Py_ssize_t s0 = i - anchor[k - 1];
            if (kws[k - 1].head) { /* back over the digits before the literal to its ':' */
                Py_ssize_t h = s0;
                while (h > pos && is_digit(buf[h - 1])) h--;
                s0 = h < s0 ? h - 1 : -1;
            }
            hit = s0 >= pos && kw_match(buf, s0, len, &kws[k - 1]) >= 0;
        }
        if (!hit) {
            i++;
            continue;
        }
        Py_ssize_t ls = i, le;
        while (ls > pos && buf[ls - 1] != '\n') ls--;
        const unsigned char *nl = memchr(buf + i, '\n', (size_t)(len - i));
        le = nl ? nl - buf : len;
        Py_ssize_t s = ls;
        while (s < le) {
            unsigned char f = buf[s];
            Py_ssize_t e = -1;
            for (Py_ssize_t j = 0; j < nfirst[f] && e < 0; j++) e = kw_match(buf, s, len, &kws[by_first[f * nk + j]]);
            if (e < 0) {
                s++;
                continue;
            }
            if (n == cap) {
                cap *= 2;
                long long *o2 = PyMem_Realloc(out, sizeof(long long) * 2 * (size_t)cap);
                if (!o2) {
                    PyErr_NoMemory();
                    goto done;
                }
                out = o2;
            }
            out[2 * n] = s;
            out[2 * n + 1] = e;
            n++;
            if (first_only) break; /* the reader reads a line once, from its first match */
            s = e;
        }
        i = le + 1;
    }
    result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)sizeof(long long) * 2 * n);
done:
    PyMem_Free(out);
    PyMem_Free(by_first);
    PyMem_Free(head);
    PyMem_Free(tab);
    PyBuffer_Release(&view);
    return result;
}

/* ---- a progress bar's line: every redraw's counter and postfix numbers ------------------------- */
/*
 * bars(line, epochs, keys) reads a tqdm bar's physical line (its redraws separated by '\r', as a
 * file gets them) the way analyzer.LogAnalyzer.bar_line reads it with formats.bar_reader's
 * regexes, run with finditer over the decoded line:
 *
 *   head   (epochs)  Epoch (\d+)(?:/\d+)?:?\s+\d+%\|[^|\r]*\|\s*(\d+)/(\d+)\s*\[
 *          (else)    ()\|\s*(\d+)/(\d+)\s*\[
 *   field  per key   KEY=(?<![\w/.-]KEY=)(NUM)        (formats.NUM, first alternative that matches)
 *
 * and gives, per head in line order, the epoch (0 without), count and total, and per key the value
 * of the last field match at or after that head's start and before the next head's (NaN and not
 * present without one).  It answers only where that reading is certain to be the regexes' one, and
 * None otherwise, so the caller reads the line with the regexes: a non-blank redraw without exactly
 * one head, a head across a '\r', a Unicode digit where \d could take it, a number with thousands
 * separators, a sign before a sign, more than 18 digits.  \s, \d and \w are the str pattern's
 * (Unicode: the predicates re itself uses, on the decoded character).  Values are float()'s: decimals of at most 15 digits as one correctly
 * rounded division (as scan), everything else through PyOS_string_to_double.
 */
#define BAR_BAIL (-2)

/* The code point at p and its length in bytes (UTF-8; an invalid sequence is one U+FFFD of one byte, as
 * the "replace" decoding gives it: no digit, space or word character either way). */
static Py_UCS4 cp_at(const unsigned char *p, const unsigned char *e, Py_ssize_t *len) {
    unsigned char c = *p;
    Py_ssize_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    Py_UCS4 cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    if (!n || e - p < n) {
        *len = 1;
        return 0xFFFD;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *len = 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    *len = n;
    return cp;
}

/* the code point that ends just before p (at least one byte after ``start``) */
static Py_UCS4 cp_before(const unsigned char *start, const unsigned char *p) {
    const unsigned char *q = p - 1;
    while (q > start && p - q < 4 && (*q & 0xc0) == 0x80) q--;
    Py_ssize_t n;
    Py_UCS4 cp = cp_at(q, p, &n);
    return q + n == p ? cp : 0xFFFD;
}

/* what a str pattern's \d, \s and \w take (re uses these predicates) */
static int uni_digit(const unsigned char *p, const unsigned char *e) {
    Py_ssize_t n;
    return p < e && *p >= 0x80 && Py_UNICODE_ISDECIMAL(cp_at(p, e, &n));
}

/* bytes of one whitespace character (as \s and str.strip take it) at p, else 0 */
static Py_ssize_t ws_len(const unsigned char *p, const unsigned char *e) {
    if (*p < 0x80) return Py_UNICODE_ISSPACE(*p) ? 1 : 0;
    Py_ssize_t n;
    Py_UCS4 cp = cp_at(p, e, &n);
    return Py_UNICODE_ISSPACE(cp) ? n : 0;
}

/* \s* (min 0) or \s+ (min 1) at *pp; 0 no match, 1 match, BAR_BAIL where it crosses a '\r' */
static int bar_spaces(const unsigned char **pp, const unsigned char *e, int min) {
    const unsigned char *p = *pp;
    int n = 0;
    Py_ssize_t k;
    while (p < e && (k = ws_len(p, e)) > 0) {
        if (*p == '\r') return BAR_BAIL;
        p += k;
        n++;
    }
    *pp = p;
    return n >= min;
}

/* \d+ at *pp (ASCII digits; a Unicode digit where one could go is a bail), its value */
static int bar_digits(const unsigned char **pp, const unsigned char *e, long long *out) {
    const unsigned char *p = *pp, *s = p;
    long long v = 0;
    while (p < e && is_digit(*p)) {
        v = v * 10 + (*p - '0');
        p++;
    }
    if (uni_digit(p, e)) return BAR_BAIL;
    if (p == s) return 0;
    if (p - s > 18) return BAR_BAIL;
    *pp = p;
    *out = v;
    return 1;
}

#define BAR_STEP(x)                     \
    do {                                \
        int r_ = (x);                   \
        if (r_ != 1) return r_ ? r_ : 0; \
    } while (0)

/* The head at p: 1 (fills the numbers and its end), 0 (none here), BAR_BAIL */
static int bar_head(const unsigned char *p, const unsigned char *e, int epochs, long long *ep, long long *count,
                    long long *total, const unsigned char **end) {
    long long tmp;
    *ep = 0;
    if (epochs) {
        p += 6; /* "Epoch " */
        BAR_STEP(bar_digits(&p, e, ep));
        if (p + 1 < e && *p == '/' && is_digit(p[1])) {
            p++;
            BAR_STEP(bar_digits(&p, e, &tmp));
        } else if (p < e && *p == '/' && uni_digit(p + 1, e)) {
            return BAR_BAIL;
        }
        if (p < e && *p == ':') p++;
        BAR_STEP(bar_spaces(&p, e, 1));
        BAR_STEP(bar_digits(&p, e, &tmp));
        if (e - p < 2 || p[0] != '%' || p[1] != '|') return 0;
        p += 2;
        while (p < e && *p != '|' && *p != '\r') p++;
        if (p >= e || *p != '|') return 0;
    }
    p++; /* the '|' */
    BAR_STEP(bar_spaces(&p, e, 0));
    BAR_STEP(bar_digits(&p, e, count));
    if (p >= e || *p != '/') return 0;
    p++;
    BAR_STEP(bar_digits(&p, e, total));
    BAR_STEP(bar_spaces(&p, e, 0));
    if (p >= e || *p != '[') return 0;
    *end = p + 1;
    return 1;
}

/* formats.NUM at p: 1 (token [p, *end)), 0 (no match), BAR_BAIL */
static int bar_num(const unsigned char *p, const unsigned char *e, const unsigned char **end) {
    if (p < e && (*p == '+' || *p == '-')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) return BAR_BAIL;
    }
    if (e - p >= 3 && (!memcmp(p, "nan", 3) || !memcmp(p, "NaN", 3) || !memcmp(p, "NAN", 3) || !memcmp(p, "inf", 3) ||
                       !memcmp(p, "Inf", 3) || !memcmp(p, "INF", 3))) {
        *end = p + 3;
        return 1;
    }
    const unsigned char *q = p;
    if (q < e && is_digit(*q)) {
        while (q < e && is_digit(*q)) q++;
        if (q - p <= 3 && q < e && *q == ',') { /* thousands separators ",ddd" take the other alternative */
            int i = 1;
            while (i <= 3 && q + i < e && is_digit(q[i])) i++;
            if (i == 4 || uni_digit(q + i, e)) return BAR_BAIL;
        }
        if (q < e && *q == '.') {
            q++;
            while (q < e && is_digit(*q)) q++;
        }
    } else if (q + 1 < e && *q == '.' && is_digit(q[1])) {
        q++;
        while (q < e && is_digit(*q)) q++;
    } else {
        return (uni_digit(q, e) || (q + 1 < e && *q == '.' && uni_digit(q + 1, e))) ? BAR_BAIL : 0;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        const unsigned char *x = q + 1;
        if (x < e && (*x == '+' || *x == '-')) x++;
        if (x < e && is_digit(*x)) {
            while (x < e && is_digit(*x)) x++;
            q = x;
        } else if (uni_digit(x, e)) {
            return BAR_BAIL;
        }
    }
    if (uni_digit(q, e)) return BAR_BAIL;
    *end = q;
    return 1;
}

/* float() of the token [s, t) */
static int bar_value(const unsigned char *s, const unsigned char *t, double *out) {
    const unsigned char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    long long m = 0;
    int digits = 0, frac = -1, simple = 1;
    for (; p < t && simple; p++) {
        if (is_digit(*p)) {
            m = m * 10 + (*p - '0');
            digits++;
            if (frac >= 0) frac++;
        } else if (*p == '.' && frac < 0) {
            frac = 0;
        } else {
            simple = 0;
        }
    }
    if (simple && digits && digits <= MAX_DIGITS) {
        double v = frac > 0 ? (double)m / POW10[frac] : (double)m;
        *out = neg ? -v : v;
        return 1;
    }
    return token_double(s, t - s, out);
}

static PyObject *fastscan_bars(PyObject *self, PyObject *args) {
    Py_buffer view;
    int epochs;
    PyObject *keys_obj;
    if (!PyArg_ParseTuple(args, "y*pO!", &view, &epochs, &PyTuple_Type, &keys_obj)) return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf, *e = buf + view.len;
    Py_ssize_t nk = PyTuple_GET_SIZE(keys_obj), cap = 256, nh = 0;
    long long *head = NULL; /* per head: start, epoch, count, total */
    double *vals = NULL;
    unsigned char *present = NULL;
    PyObject *result = NULL;
    int bail = 0, seg_heads = 0, seg_blank = 1;
    const unsigned char *p = buf, *seg = buf;
    if (nk > 16) {
        PyErr_SetString(PyExc_ValueError, "at most 16 keys");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(keys_obj, k);
        if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) < 1) {
            PyErr_SetString(PyExc_TypeError, "keys must be non-empty bytes");
            goto done;
        }
    }
    head = PyMem_Malloc(sizeof(long long) * 4 * (size_t)cap);
    if (!head) {
        PyErr_NoMemory();
        goto done;
    }
    /* the heads, as finditer finds them, and one per non-blank redraw */
    for (;;) {
        const unsigned char *hit;
        if (epochs) {
            hit = p < e ? memchr(p, 'E', (size_t)(e - p)) : NULL;
            while (hit && (e - hit < 6 || memcmp(hit, "Epoch ", 6) != 0))
                hit = hit + 1 < e ? memchr(hit + 1, 'E', (size_t)(e - hit - 1)) : NULL;
        } else {
            hit = p < e ? memchr(p, '|', (size_t)(e - p)) : NULL;
        }
        /* the redraws that end before the hit (or the line's end) */
        const unsigned char *upto = hit ? hit : e;
        for (;;) {
            const unsigned char *cr = memchr(seg, '\r', (size_t)(upto - seg));
            const unsigned char *se = cr ? cr : upto;
            if (seg_blank)
                for (const unsigned char *q = seg; q < se;) {
                    Py_ssize_t k = ws_len(q, e);
                    if (!k || *q == '\r') {
                        seg_blank = 0;
                        break;
                    }
                    q += k;
                }
            if (!cr) {
                seg = upto;
                break;
            }
            if (seg_heads != (seg_blank ? 0 : 1)) {
                bail = 1;
                goto done;
            }
            seg = cr + 1;
            seg_heads = 0;
            seg_blank = 1;
        }
        if (!hit) break;
        long long ep, count, total;
        const unsigned char *end;
        int r = bar_head(hit, e, epochs, &ep, &count, &total, &end);
        if (r == BAR_BAIL) {
            bail = 1;
            goto done;
        }
        if (r == 0) {
            p = hit + 1;
            continue;
        }
        if (nh == cap) {
            cap *= 2;
            long long *h2 = PyMem_Realloc(head, sizeof(long long) * 4 * (size_t)cap);
            if (!h2) {
                PyErr_NoMemory();
                goto done;
            }
            head = h2;
        }
        head[4 * nh] = hit - buf;
        head[4 * nh + 1] = ep;
        head[4 * nh + 2] = count;
        head[4 * nh + 3] = total;
        nh++;
        seg_heads++;
        seg_blank = 0;
        /* the head's own text up to its end belongs to this redraw ([^|\r] and \s checked it has no '\r') */
        seg = end;
        p = end;
    }
    if (seg_heads != (seg_blank ? 0 : 1)) {
        bail = 1;
        goto done;
    }
    vals = PyMem_Malloc(sizeof(double) * (size_t)(nh * nk + 1));
    present = PyMem_Calloc((size_t)(nh * nk + 1), 1);
    if (!vals || !present) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nh * nk; i++) vals[i] = Py_NAN;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(keys_obj, k);
        const unsigned char *ks = (const unsigned char *)PyBytes_AS_STRING(key);
        Py_ssize_t kn = PyBytes_GET_SIZE(key), h = 0;
        const unsigned char *q = buf;
        while (e - q > kn) {
            const unsigned char *m = memchr(q, ks[0], (size_t)(e - q - kn));
            if (!m) break;
            if (memcmp(m, ks, (size_t)kn) != 0 || m[kn] != '=') {
                q = m + 1;
                continue;
            }
            if (m > buf) { /* the lookbehind: no [\w/.-] before the key */
                Py_UCS4 c = m[-1] < 0x80 ? m[-1] : cp_before(buf, m);
                if (c == '_' || c == '/' || c == '.' || c == '-' || Py_UNICODE_ISALNUM(c)) {
                    q = m + 1;
                    continue;
                }
            }
            const unsigned char *end;
            int r = bar_num(m + kn + 1, e, &end);
            if (r == BAR_BAIL) {
                bail = 1;
                goto done;
            }
            if (r == 0) {
                q = m + 1;
                continue;
            }
            Py_ssize_t at = m - buf;
            while (h < nh && head[4 * h] <= at) h++; /* h - 1: the last head at or before the match */
            if (h > 0) {
                double v;
                if (!bar_value(m + kn + 1, end, &v)) {
                    bail = 1;
                    goto done;
                }
                vals[(h - 1) * nk + k] = v;
                present[(h - 1) * nk + k] = 1;
            }
            q = end;
        }
    }
    {
        long long *cols = PyMem_Malloc(sizeof(long long) * 3 * (size_t)(nh + 1));
        if (!cols) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nh; i++) {
            cols[i] = head[4 * i + 1];
            cols[nh + i] = head[4 * i + 2];
            cols[2 * nh + i] = head[4 * i + 3];
        }
        result = Py_BuildValue("(y#y#y#n)", (const char *)cols, (Py_ssize_t)sizeof(long long) * 3 * nh,
                               (const char *)vals, (Py_ssize_t)sizeof(double) * nh * nk, (const char *)present,
                               nh * nk, nh);
        PyMem_Free(cols);
    }
done:
    PyMem_Free(head);
    PyMem_Free(vals);
    PyMem_Free(present);
    PyBuffer_Release(&view);
    if (bail && !result && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}

static PyMethodDef methods[] = {
    {"keywords", fastscan_keywords, METH_VARARGS,
     "keywords(buf, pos, keywords, anchors, tails[, first_only]) -> int64 bytes of (start, end) per match, as "
     "re.finditer finds the alternation of the keywords from pos (with first_only: the first match of each line)"},
    {"bars", fastscan_bars, METH_VARARGS,
     "bars(line, epochs, keys) -> (epoch, count, total int64 bytes, values float64 bytes (per head, per key), present "
     "bytes, heads) or None: a tqdm bar line's redraws as LogAnalyzer.bar_line's regexes read them"},
    {"scan", fastscan_scan, METH_VARARGS,
     "scan(buf, pieces, slots[, widths[, flex flags[, segments]]]) -> (line indices int64 bytes, line (or "
     "segment) offsets int64 bytes, values float64 bytes, blanked copy, newlines)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastscan",
                                    "Progress-line template matching over whole chunks.", -1, methods};

PyMODINIT_FUNC PyInit__fastscan(void) { return PyModule_Create(&module); }
