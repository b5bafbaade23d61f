/*
 * search.c — the joint search of `ravel tune` (issue 15; DietCode,
 * Zheng et al., MLSys 2022, §4): one search over the micro-kernels of
 * space.c for every shape of the size range at once, a cost model learned
 * from all shapes' measurements, and a dispatcher over the sizes.
 *
 * THE COST MODEL (DietCode Eq. 3). The throughput of candidate c at shape
 * s is predicted as
 *
 *     f_MK(features(c, s)) * f_occ(c, s) * f_pad(c, s)
 *
 * f_MK is learned with XGBoost (xgb.c) from the loop-IR features
 * (features.c), as log GFLOP/s with f_occ and f_pad divided out; f_pad is
 * the useful over the padded work of c's tile at s (analytic); f_occ is a
 * linear function a * occupancy + b of the core occupancy (tasks over
 * cores times waves, a feature), its coefficients fitted by least squares
 * to the measurements with f_MK and f_pad divided out. Neither part needs
 * the other to be right first: each fit uses the other's latest estimate.
 *
 * ROUNDS. Each round picks a few shapes by expected gain: a shape's
 * weight (its frequency in --shapes, else 1) times how much the model's
 * best candidate there would improve on what the dispatcher has for it
 * (the verified candidates), plus a bonus for a shape with no
 * measurement, growing with its distance from the measured ones; before
 * any model, the furthest shapes. On each picked shape it measures the population's best
 * predicted candidates not yet measured there, plus one drawn at random
 * from the whole space (exploration), compiled together as the variants
 * of one program (measure.c). A candidate is checked against the
 * interpreter before its first timing, at the range's smallest shape and
 * the smallest that differs from it in leaving a partial tile; a wrong one is reported and
 * never chosen. Then the model is refitted and the population evolves:
 * the better half by predicted throughput over all shapes (weighted) stays,
 * and mutations of it (one knob changed: space.c's neighbours) and random
 * candidates fill the rest.
 *
 * RECORDS. Every measurement is appended to the records file as it is
 * made (records.c) and a run starts by reading it: measurements of this
 * program on this machine class at this run's thread count are taken as
 * made, so a resumed run measures nothing twice, and the trial budget
 * counts them. Another thread count's records are not this run's: a
 * kernel's time at 2 threads says little of its time at 1.
 *
 * THE DISPATCHER. Each shape votes for the verified candidate with the
 * best throughput there (the best measured where any was measured there,
 * else the best predicted); the votes are merged to at most max_variants
 * kernels (those with the most weight of shapes; the other shapes take
 * their best among them, measured first), plus the vote of each shape
 * where the records show a known-good sketch (space.c) faster than every
 * kept kernel, and a decision tree (dtree.c) over the sizes learns the
 * map.
 *
 * VERIFYING. Before it finishes, the best predicted candidate of each
 * kind (a template and its knobs but the tile's size) is measured at
 * anchor shapes 1.5x apart where none of that kind was, so no kind is
 * judged by the model alone; then the kernel the dispatcher gives each
 * shape is measured there where it never was (with the best predicted
 * there), a measured one is challenged by a candidate predicted 1.1x
 * faster, and the votes are redone, measured times first, until each is
 * measured and unchallenged or --verify's budget is spent (verify()).
 *
 * SPECIALIZED LEAVES. A few small, frequent measured shapes (spec_shapes)
 * also have their best candidates measured compiled for that shape alone,
 * its sizes constants (rv_dispatch.variant_sizes: no tails, constant
 * extents, as a kernel written for one shape), and the best of the
 * leaf's own space: candidates the checker accepts only at those
 * constant sizes (space.c's tune_space_add_leaf: a tile padded over j
 * where j's extent is a multiple of it); where one beats the tree's
 * kernel there, the shape gets it as a leaf of its own, which the
 * dispatcher tests for exactly, ahead of the tree (docs/tuning.md).
 *
 * SKETCHES. The known-good sketches (space.c: among them every
 * hand-written schedule of bench/programs) start the population and stay
 * in it, and the first candidates measured at a shape with no sketch of
 * some kind measured near it (within a factor of 1.5 in each size) are
 * the best predicted sketch of each such kind (dot; tile with B packed
 * row by row, transposed in blocks or read in place; kblock; stream).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "runtime/program.h"
#include "tune/tune.h"

enum { LEAF_LEGAL = 1, LEAF_SEED = 2 }; /* Tuner.leaf_legal */

/* A specialized record of a schedule not in the generic space (legal
 * only at its shape): matched once the leaf's space at the shape is
 * built (leaf_space). g: GFLOP/s, -1 failed, 0 not to be used (stale). */
typedef struct LeafRecord {
    char *trace;
    int s;
    double g;
} LeafRecord;

typedef struct Tuner {
    rv_module *m;
    const TuneOptions *o;
    const TuneHw *hw;
    int lanes, cores;
    int cores_usable;  /* the shared pool's threads (hw.c's usable cores) */
    TuneSpace sp;
    TuneShape *shapes;
    double *w;
    int ns;
    float *feat;       /* [c][s][TUNE_F_COUNT] */
    bool *has_feat;    /* per candidate */
    double *gflop;     /* useful GFLOP per shape */
    signed char *ok;   /* per candidate: 1 verified, -1 wrong or failed, 0 not yet */
    double *meas;      /* [c * ns + s]: GFLOP/s measured; 0 not measured, -1 failed */
    double *smeas;     /* the same of c compiled for shape s alone (specialized); c
                        * counts the leaves' candidates too (sp.cands[sp.len..]) */
    unsigned char *leaf_legal; /* [(c - sp.len) * ns + s]: leaf candidate c at s: 0 not
                                * legal, LEAF_LEGAL, LEAF_SEED (a known-good sketch there) */
    LeafRecord *leaf_recs; /* records of candidates only the leaves' spaces hold */
    int nleaf_recs;
    bool *stale;       /* [c * ns + s]: meas is a record of other code than c's today */
    unsigned char *nmeas; /* [c * ns + s]: times of this code generator, meas their best */
    double *best;      /* per shape: the best measured GFLOP/s */
    float *pred;       /* [c * ns + s]: predicted GFLOP/s (valid when trained) */
    rv_bindings **refs; /* per shape: the interpreter's results, once computed */
    XgbModel *xgb;
    bool trained;
    double occ_a, occ_b;
    int *pop;          /* the population: candidate indices */
    int npop;
    uint64_t rng;
    /* records */
    char program[17];
    Buf machine;
    int threads;       /* the measured kernels' thread pool: the records' count */
    StrMap by_sched;   /* schedule text -> candidate index + 1 */
    TuneResult *res;
    char sum_name[80]; /* ragged rows: their variable, "sum(len)" */
    double t0;
    long begun; /* candidates whose measuring began (RAVEL_TUNE_FAULT counts them) */
    /* code keys (code_key): "trace" or "trace\n@shape" -> 32 hex digits,
     * "" where the trace does not lower; keys and values in key_arena */
    StrMap code_keys;
    Arena *key_arena;
    double key_seconds; /* spent making them */
    int nkeys;
} Tuner;

static uint64_t next_rand(Tuner *t) {
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    return t->rng;
}

/* ---- shapes ---- */

/* The tuning variables: the module's sizes, then a quantity at
 * v[nsizes] of a shape and in the dispatch's input after the sizes: for
 * ragged rows their sum (TuneStage.rows_uf; rv_dispatch.sums), for a
 * recursion's member the nodes per level (TuneStage.group; the emitted
 * dispatch computes N / _T_nbatch). */
static int num_vars(const Tuner *t) {
    return rv_module_num_sizes(t->m) + (t->sp.stage.rows_uf || t->sp.stage.group);
}

/* The size whose place in a shape the quantity takes while shapes are
 * made (its range is the quantity's); NULL: none. */
static const rv_size *quantity_carrier(const Tuner *t) {
    const TuneStage *st = &t->sp.stage;
    if (st->group)
        return st->group->st->count ? st->group->st->count : st->group->st->nodes;
    return st->rows_outer;
}

/* Is size z determined by the quantity (its column is no input of the
 * tree, and shapes do not range over it)? */
static bool set_by_quantity(const Tuner *t, const rv_size *z) {
    const TuneStage *st = &t->sp.stage;
    const Structure *T = st->group ? st->group->st : NULL;
    return z == st->rows_outer || tune_size_set_by_levels(T, z);
}

/* The quantity's range: packed rows from the fewest to the most; nodes
 * per level from 1 to what the structure's sizes allow with
 * TUNE_LEVELS levels. */
static void quantity_range(const Tuner *t, int64_t *lo, int64_t *hi) {
    const TuneStage *st = &t->sp.stage;
    if (st->rows_uf) {
        *lo = st->rows_outer->lo * st->len_lo;
        *hi = st->rows_outer->hi * st->len_hi;
        return;
    }
    const Structure *T = st->group->st;
    *lo = T->count && T->count->lo > 1 ? T->count->lo : 1;
    *hi = T->nodes->hi / TUNE_LEVELS;
    if (T->count && T->count->hi < *hi)
        *hi = T->count->hi;
}

static const char *var_name(const Tuner *t, int i) {
    return i < rv_module_num_sizes(t->m) ? rv_size_name(rv_module_size_at(t->m, i))
                                         : t->sum_name;
}

/* Shape sh with its outer size's value read as packed rows: the size
 * becomes the number of sequences they are drawn over (a mean length
 * midway in the UF's range, within the size's range). False when no
 * count in the range fits. */
static bool packed_shape(const Tuner *t, TuneShape *sh) {
    const TuneStage *st = &t->sp.stage;
    const rv_size *outer = st->rows_outer;
    int64_t p = sh->v[outer->id], lo = st->len_lo, hi = st->len_hi;
    int64_t mid = (lo + hi) / 2 > 0 ? (lo + hi) / 2 : 1;
    int64_t least = hi > 0 ? (p + hi - 1) / hi : outer->lo, most = lo > 0 ? p / lo : outer->hi;
    least = least > outer->lo ? least : outer->lo;
    most = most < outer->hi ? most : outer->hi;
    int64_t n = (p + mid - 1) / mid;
    n = n < least ? least : n > most ? most : n;
    if (least > most || p < 0)
        return false;
    sh->rows_uf = st->rows_uf;
    sh->quantity = p;
    sh->v[outer->id] = n;
    sh->v[rv_module_num_sizes(t->m)] = p;
    return true;
}

/* Shape sh with its carrier's value read as nodes per level: chains of
 * that many nodes side by side, TUNE_LEVELS long (tune_shape_bind), so
 * N, B and _T_nbatch follow. False when the structure's sizes do not
 * allow it. */
static bool level_shape(const Tuner *t, TuneShape *sh) {
    const Structure *T = t->sp.stage.group->st;
    int64_t q = sh->v[quantity_carrier(t)->id], lo, hi;
    quantity_range(t, &lo, &hi);
    if (q < lo || q > hi || q * TUNE_LEVELS < T->nodes->lo)
        return false;
    sh->group = t->sp.stage.group;
    sh->quantity = q;
    sh->v[T->nodes->id] = q * TUNE_LEVELS;
    if (T->count)
        sh->v[T->count->id] = q;
    sh->v[T->nbatch->id] = TUNE_LEVELS;
    sh->v[rv_module_num_sizes(t->m)] = q;
    return true;
}

/* sh's carrier read as the quantity (packed_shape, level_shape); true
 * for a stage without one. */
static bool quantity_shape(const Tuner *t, TuneShape *sh) {
    return t->sp.stage.rows_uf ? packed_shape(t, sh)
                               : t->sp.stage.group ? level_shape(t, sh) : true;
}

/* The shapes of the range when the caller gives none: every point when
 * there are at most 256, else up to 64 per size spread geometrically
 * (small sizes differ most), in a product capped at 512 points. */
static void default_shapes(Tuner *t) {
    int nsz = rv_module_num_sizes(t->m), nfree = 0;
    for (int i = 0; i < nsz; i++) {
        const rv_size *sz = rv_module_size_at(t->m, i);
        nfree += !set_by_quantity(t, sz) || sz == quantity_carrier(t);
    }
    int64_t vals[8][256];
    int nv[8] = {0};
    int per = nfree <= 1 ? 64 : nfree == 2 ? 22 : 8, all = nfree <= 1 ? 256 : per;
    for (int i = 0; i < nsz; i++) {
        const rv_size *sz = rv_module_size_at(t->m, i);
        int64_t lo = sz->lo, hi = sz->hi;
        if (sz == quantity_carrier(t)) /* the quantity in its place */
            quantity_range(t, &lo, &hi);
        else if (set_by_quantity(t, sz)) /* quantity_shape sets it */
            hi = lo;
        if (hi - lo + 1 <= all) {
            for (int64_t v = lo; v <= hi; v++)
                vals[i][nv[i]++] = v;
            continue;
        }
        double r = pow((double)(hi - lo + 1), 1.0 / (per - 1));
        for (int q = 0; q < per; q++) {
            int64_t v = lo + (int64_t)llround(pow(r, q)) - 1;
            if (q == per - 1 || v > hi)
                v = hi;
            if (nv[i] == 0 || v > vals[i][nv[i] - 1])
                vals[i][nv[i]++] = v;
        }
    }
    int n = 1;
    for (int i = 0; i < nsz; i++)
        n *= nv[i];
    t->ns = n;
    t->shapes = base_xcalloc((size_t)n, sizeof *t->shapes);
    t->w = base_xcalloc((size_t)n, sizeof *t->w);
    for (int s = 0; s < n; s++) {
        int rest = s;
        for (int i = nsz - 1; i >= 0; i--) {
            t->shapes[s].v[i] = vals[i][rest % nv[i]];
            rest /= nv[i];
        }
        t->w[s] = 1;
    }
    int kept = 0;
    for (int s = 0; s < n; s++) {
        TuneShape sh = t->shapes[s];
        if (quantity_shape(t, &sh))
            t->shapes[kept++] = sh;
    }
    t->ns = kept;
}

static int find_shape(const Tuner *t, const int64_t *v) {
    int nvar = num_vars(t);
    for (int s = 0; s < t->ns; s++)
        if (memcmp(t->shapes[s].v, v, sizeof(int64_t) * (size_t)nvar) == 0)
            return s;
    return -1;
}

/* ---- the cost model ---- */

static const float *feat_of(Tuner *t, int c, int s) {
    if (!t->has_feat[c]) {
        float *f = &t->feat[(size_t)c * t->ns * TUNE_F_COUNT];
        if (tune_features(t->m, t->sp.cands[c].sched, t->shapes, t->ns, t->lanes, t->cores, f) !=
            RV_OK)
            t->ok[c] = -1; /* space.c lowered it already: not expected */
        t->has_feat[c] = true;
    }
    return &t->feat[((size_t)c * t->ns + s) * TUNE_F_COUNT];
}

/* Useful over padded work of c's tile at s. */
static double f_pad(const Tuner *t, int c, int s) {
    double batch, rows, cols, red;
    tune_stage_extents(&t->sp.stage, &t->shapes[s], &batch, &rows, &cols, &red);
    const TuneCand *x = &t->sp.cands[c];
    double ti = x->tile_i, tj = x->tile_j;
    return rows / (ceil(rows / ti) * ti) * (cols / (ceil(cols / tj) * tj));
}

static double f_occ(Tuner *t, int c, int s) {
    double v = t->occ_a * feat_of(t, c, s)[TUNE_F_OCCUPANCY] + t->occ_b;
    return v < 0.05 ? 0.05 : v;
}

/* Fits f_MK to every measurement, then f_occ's line to what f_MK and
 * f_pad leave. */
static rv_status train(Tuner *t) {
    int n = 0;
    for (int i = 0; i < t->sp.len * t->ns; i++)
        n += t->meas[i] > 0;
    if (n < 4)
        return RV_OK;
    float *x = base_xcalloc((size_t)n * TUNE_F_COUNT, sizeof *x), *y = base_xcalloc((size_t)n, 4);
    float *p = base_xcalloc((size_t)n, sizeof *p);
    int *cs = base_xcalloc((size_t)n * 2, sizeof *cs), k = 0;
    for (int c = 0; c < t->sp.len; c++)
        for (int s = 0; s < t->ns; s++) {
            double g = t->meas[c * t->ns + s];
            if (g <= 0)
                continue;
            memcpy(&x[(size_t)k * TUNE_F_COUNT], feat_of(t, c, s), sizeof(float) * TUNE_F_COUNT);
            y[k] = (float)log(g / (f_occ(t, c, s) * f_pad(t, c, s)));
            cs[2 * k] = c;
            cs[2 * k + 1] = s;
            k++;
        }
    rv_status st = tune_xgb_train(t->xgb, x, n, TUNE_F_COUNT, y, NULL, 0);
    if (st == RV_OK)
        st = tune_xgb_predict(t->xgb, x, n, TUNE_F_COUNT, p);
    if (st == RV_OK) {
        /* least squares of g / (f_MK f_pad) on the occupancy */
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int i = 0; i < n; i++) {
            int c = cs[2 * i], s = cs[2 * i + 1];
            double o = feat_of(t, c, s)[TUNE_F_OCCUPANCY];
            double r = t->meas[c * t->ns + s] / (exp(p[i]) * f_pad(t, c, s));
            sx += o, sy += r, sxx += o * o, sxy += o * r;
        }
        double det = n * sxx - sx * sx;
        if (det > 1e-9 * n * n) {
            double a = (n * sxy - sx * sy) / det, b = (sy - a * sx) / n;
            if (a > 0 && a + b > 0.1) {
                /* f_MK absorbs the scale: keep f_occ(1) near 1 */
                t->occ_a = a / (a + b);
                t->occ_b = b / (a + b);
            }
        }
        t->trained = true;
    }
    base_free(cs);
    base_free(p);
    base_free(y);
    base_free(x);
    return st;
}

static bool in_pop(const Tuner *t, int c) {
    for (int i = 0; i < t->npop; i++)
        if (t->pop[i] == c)
            return true;
    return false;
}

/* Predicted GFLOP/s at every shape of the population's candidates and of
 * the verified ones (what the dispatcher could choose today). */
static rv_status predict(Tuner *t) {
    if (!t->trained)
        return RV_OK;
    float *out = base_xcalloc((size_t)t->ns, sizeof *out);
    rv_status st = RV_OK;
    for (int c = 0; st == RV_OK && c < t->sp.len; c++) {
        if (t->ok[c] <= 0 && !in_pop(t, c))
            continue;
        feat_of(t, c, 0);
        st = tune_xgb_predict(t->xgb, &t->feat[(size_t)c * t->ns * TUNE_F_COUNT], t->ns, TUNE_F_COUNT,
                              out);
        for (int s = 0; st == RV_OK && s < t->ns; s++)
            t->pred[c * t->ns + s] = (float)(exp(out[s]) * f_occ(t, c, s) * f_pad(t, c, s));
    }
    base_free(out);
    return st;
}

/* A candidate's throughput at s as the dispatcher and the population see
 * it: measured where it was, else predicted (0 before any model). */
static double score(const Tuner *t, int c, int s) {
    double g = t->meas[c * t->ns + s];
    return g > 0 ? g : g < 0 ? 0 : t->trained ? t->pred[c * t->ns + s] : 0;
}

/* Keeps the better half of the population by weighted predicted
 * throughput (relative to each shape's best), fills the rest with
 * mutations of the kept and random candidates. */
static void evolve(Tuner *t, int size) {
    double *fit = base_xcalloc((size_t)t->npop, sizeof *fit);
    for (int i = 0; i < t->npop; i++) {
        int c = t->pop[i];
        if (t->ok[c] < 0) {
            fit[i] = -1;
            continue;
        }
        for (int s = 0; s < t->ns; s++) {
            double top = t->best[s];
            for (int j = 0; j < t->npop; j++)
                if (score(t, t->pop[j], s) > top)
                    top = score(t, t->pop[j], s);
            fit[i] += t->w[s] * (top > 0 ? score(t, c, s) / top : 0);
        }
    }
    /* sort the population by fitness, best first (insertion: it is small) */
    for (int i = 1; i < t->npop; i++)
        for (int j = i; j > 0 && fit[j] > fit[j - 1]; j--) {
            double f = fit[j];
            fit[j] = fit[j - 1];
            fit[j - 1] = f;
            int c = t->pop[j];
            t->pop[j] = t->pop[j - 1];
            t->pop[j - 1] = c;
        }
    int keep = (t->npop + 1) / 2;
    while (keep > 0 && fit[keep - 1] < 0)
        keep--;
    t->npop = keep;
    /* the known-good sketches stay: the model may not yet see where one
     * wins (a small T), and the dispatcher measures against them */
    for (int c = 0; c < t->sp.len; c++)
        if (t->sp.cands[c].seed && t->ok[c] >= 0 && !in_pop(t, c))
            t->pop[t->npop++] = c;
    for (int tries = 0; t->npop < size && tries < 8 * size; tries++) {
        int c;
        if (keep > 0 && tries % 3 != 2)
            c = tune_space_neighbour(&t->sp, t->pop[next_rand(t) % (uint64_t)keep], next_rand(t));
        else
            c = (int)(next_rand(t) % (uint64_t)t->sp.len);
        if (c >= 0 && t->ok[c] >= 0 && !in_pop(t, c))
            t->pop[t->npop++] = c;
    }
    base_free(fit);
}

/* ---- choosing what to measure ---- */

/* How far shape s lies from every shape measured or picked this round
 * (in the order of the shapes: the range's order), ns when none is. */
static double distance(const Tuner *t, int s, const bool *used) {
    double near = (double)t->ns;
    for (int q = 0; q < t->ns; q++)
        if ((t->best[q] > 0 || used[q]) && fabs((double)(q - s)) < near)
            near = fabs((double)(q - s));
    return near;
}

typedef struct Pair {
    int c, s;
} Pair;

/* Whether candidates a and b are known-good sketches of one kind (one
 * template, differing only in the register tile's size). */
static bool same_sketch(const Tuner *t, int a, int b) {
    const TuneCand *x = &t->sp.cands[a], *y = &t->sp.cands[b];
    return x->seed && y->seed && x->tmpl == y->tmpl && x->sketch == y->sketch;
}

/* Whether candidates a and b are of one kind (TuneCand.kind: one template
 * and structure, any tile size), sketches or not. */
static bool same_kind(const Tuner *t, int a, int b) {
    const TuneCand *x = &t->sp.cands[a], *y = &t->sp.cands[b];
    return x->tmpl == y->tmpl && x->kind == y->kind;
}

/* How far a sketch's measurement reaches: shapes whose every variable is
 * within this factor of another's (T = 16 and 21) share what the model
 * knows of each kind of sketch. Measuring every kind at every shape
 * (8 kinds at bmm_nt) spent 256 trials on about 12 of its 128 shapes; at
 * anchors a factor of 1.5 apart the kinds cost about ten shapes' worth
 * (1, 2-3, 4-6, ..., 86-128), and elsewhere the model's picks run. */
#define SKETCH_REACH 1.5

/* Whether shapes a and b are within SKETCH_REACH of each other in every
 * variable (0 only of 0). */
static bool near_shape(const Tuner *t, int a, int b) {
    for (int i = 0; i < num_vars(t); i++) {
        double x = (double)t->shapes[a].v[i], y = (double)t->shapes[b].v[i];
        double lo = fmin(x, y), hi = fmax(x, y);
        if (hi > lo && (lo <= 0 || hi > SKETCH_REACH * lo))
            return false;
    }
    return true;
}

/* Whether a known-good sketch of candidate k's kind was measured at a
 * shape near s (near_shape) or is among the n pairs already chosen
 * there. */
static bool sketch_seen(const Tuner *t, const Pair *out, int n, int s, int k) {
    for (int c = 0; c < t->sp.len; c++)
        if (same_sketch(t, c, k))
            for (int q = 0; q < t->ns; q++)
                if (t->meas[c * t->ns + q] != 0 && near_shape(t, q, s))
                    return true;
    for (int j = 0; j < n; j++)
        if (near_shape(t, out[j].s, s) && same_sketch(t, out[j].c, k))
            return true;
    return false;
}

/* Whether some kind of usable known-good sketch has none measured near s
 * (the kinds of one template run apart: bmm_nn's tile at T = 128 with B
 * packed row by row takes 1.9x the time of the one reading B in place,
 * the hand-written kind, which a per-template rule never measured above
 * T = 24). */
static bool sketch_missing(const Tuner *t, int s) {
    for (int c = 0; c < t->sp.len; c++)
        if (t->sp.cands[c].seed && t->ok[c] >= 0 && !sketch_seen(t, NULL, 0, s, c))
            return true;
    return false;
}

/* A shape's expected gain (weighted): how much the population's best
 * unmeasured candidate there is predicted to improve on what the
 * dispatcher has for it today (the verified candidates, measured there or
 * predicted), plus, for a shape with no measurement yet, a bonus that
 * grows with its distance from the measured ones (what the model knows
 * least). */
static double gain(Tuner *t, int s, const bool *used) {
    /* no model yet: spread the measurements over the range (a measured
     * shape stays eligible: with one shape, every round measures it) */
    if (!t->trained)
        return t->w[s] * (distance(t, s, used) + 1);
    double top = 0, cur = t->best[s];
    for (int c = 0; c < t->sp.len; c++)
        if (t->ok[c] > 0 && score(t, c, s) > cur)
            cur = score(t, c, s);
    for (int i = 0; i < t->npop; i++) {
        int c = t->pop[i];
        if (t->ok[c] >= 0 && t->meas[c * t->ns + s] == 0 && t->pred[c * t->ns + s] > top)
            top = t->pred[c * t->ns + s];
    }
    if (top == 0)
        return 0;
    double g = cur > 0 ? top / cur - 1 : 1e3;
    if (t->best[s] == 0)
        g += distance(t, s, used) / t->ns;
    /* a measured shape where a kind of sketch never ran nearby: the
     * model has seen no kernel of that kind there (stream at T = 1, where
     * it wins), so it knows as little as at an unmeasured shape: as much
     * gain */
    if (t->best[s] > 0 && sketch_missing(t, s))
        g = (g > 0 ? g : 0) + 1e3;
    return t->w[s] * (g > 0 ? g : 0);
}

/* The population's candidate of the best predicted throughput at s (a
 * random one before a model) that is neither measured there nor among the
 * n pairs already chosen; with new_sketch, only a known-good sketch of a
 * kind none of whose sketches is measured or chosen there. -1 when
 * none. */
static int pick_predicted(Tuner *t, const Pair *out, int n, int s, bool new_sketch) {
    int pick = -1;
    double top = -1;
    for (int i = 0; i < t->npop; i++) {
        int c = t->pop[i];
        if (new_sketch &&
            (!t->sp.cands[c].seed || sketch_seen(t, out, n, s, c)))
            continue;
        bool taken = false;
        for (int j = 0; j < n; j++)
            taken |= out[j].c == c && out[j].s == s;
        double v = t->trained ? t->pred[c * t->ns + s] : (double)(next_rand(t) % 1000);
        if (!taken && t->ok[c] >= 0 && t->meas[c * t->ns + s] == 0 && v > top)
            top = v, pick = c;
    }
    return pick;
}

/* The round's measurements: up to `want` pairs over the shapes of most gain. */
static int choose(Tuner *t, Pair *out, int want) {
    int nsh = t->o->shapes_per_round > 0 ? t->o->shapes_per_round : 2;
    if (nsh > t->ns)
        nsh = t->ns; /* a round's measurements go to the shapes there are */
    bool *used = base_xcalloc((size_t)t->ns, sizeof *used);
    int n = 0;
    for (int k = 0; k < nsh && n < want; k++) {
        int s = -1;
        double g = 0;
        for (int q = 0; q < t->ns; q++) {
            double x = used[q] ? 0 : gain(t, q, used);
            if (x > g)
                g = x, s = q;
        }
        /* the model expects no gain anywhere: a model is not the machine,
         * so the budget goes on exploring, where it knows least (the
         * shapes furthest from the measured ones, by weight) */
        bool explore = s < 0;
        for (int q = 0; explore && q < t->ns; q++) {
            double x = used[q] ? 0 : t->w[q] * (distance(t, q, used) + 1);
            if (x > g)
                g = x, s = q;
        }
        if (s < 0)
            break;
        used[s] = true;
        int per = (want - n) / (nsh - k);
        if (per < 1)
            per = 1;
        /* first the best predicted known-good sketch of each kind with
         * none measured near here yet (any before a model), so the records
         * hold every kind of sketch near every measured shape (the model
         * may misjudge a kind where it has seen none: stream at T = 1),
         * then the population's best predicted (any order before a model) */
        for (int m = 0; m < per - 1 || (m < per && t->sp.len <= t->npop); m++) {
            int pick = pick_predicted(t, out, n, s, true);
            if (pick < 0)
                pick = pick_predicted(t, out, n, s, false);
            if (pick < 0)
                break;
            out[n++] = (Pair){pick, s};
        }
        /* one from anywhere in the space */
        for (int tries = 0; tries < 16 && n < want; tries++) {
            int c = (int)(next_rand(t) % (uint64_t)t->sp.len);
            bool taken = false;
            for (int j = 0; j < n; j++)
                taken |= out[j].c == c && out[j].s == s;
            if (!taken && t->ok[c] >= 0 && t->meas[c * t->ns + s] == 0) {
                out[n++] = (Pair){c, s};
                break;
            }
        }
    }
    base_free(used);
    return n;
}

/* ---- code keys ---- */

/* The sizes of shape s, in module order, as constants of a variant. */
static rv_variant_sizes shape_at(const Tuner *t, int s) {
    rv_variant_sizes at = {.nsizes = rv_module_num_sizes(t->m)};
    for (int i = 0; i < at.nsizes; i++) {
        at.at[i].size = rv_size_name(rv_module_size_at(t->m, i));
        at.at[i].value = t->shapes[s].v[i];
    }
    return at;
}

/* The key of the code a measurement of `trace` at shape s runs
 * (rv_program_code_key: the JIT's key of its C, its compiler and flags):
 * the generic candidate's C is one for every shape (its sizes are
 * arguments), a specialized one's is its shape's. A record is current
 * where its "code" is this key (docs/tuning.md, "Stale records"). Made
 * once per trace (and shape, when spec) by lowering and emitting C, no
 * compile; NULL where the trace no longer lowers (its records are stale). */
static const char *code_key(Tuner *t, const char *trace, int s, bool spec) {
    Buf k = {0};
    buf_puts(&k, trace);
    if (spec)
        buf_printf(&k, "\n@%d", s);
    const char *key = strmap_get(&t->code_keys, buf_str(&k));
    if (!key) {
        double t0 = rt_now_seconds();
        char hex[33];
        rv_variant_sizes at = spec ? shape_at(t, s) : (rv_variant_sizes){0};
        rv_compile_options opt = {.threads = t->o->threads};
        if (!t->key_arena)
            t->key_arena = arena_new();
        key = rv_program_code_key(t->m, trace, spec ? &at : NULL, &opt, hex) == RV_OK
                  ? arena_strdup(t->key_arena, hex)
                  : "";
        strmap_put(&t->code_keys, arena_strdup(t->key_arena, buf_str(&k)), (void *)key);
        t->key_seconds += rt_now_seconds() - t0;
        t->nkeys++;
    }
    buf_free(&k);
    return key[0] ? key : NULL;
}

/* ---- measuring ---- */

static void record(Tuner *t, int c, int s, double seconds, TuneStatus st, bool spec) {
    if (!t->o->records)
        return;
    int nvar = num_vars(t);
    const char *names[8];
    for (int i = 0; i < nvar; i++)
        names[i] = var_name(t, i);
    TuneRecord r = {.program = t->program,
                    .machine = buf_str(&t->machine),
                    .trace = t->sp.cands[c].sched,
                    .nsizes = nvar,
                    .size_names = names,
                    .size_values = t->shapes[s].v,
                    .seconds = seconds,
                    .status = st,
                    .threads = t->threads,
                    .spec = spec,
                    .clock = tune_clock_for_threads(t->threads),
                    .code = code_key(t, t->sp.cands[c].sched, s, spec)};
    if (tune_record_append(t->o->records, &r) != RV_OK)
        fprintf(stderr, "ravel tune: warning: %s\n", rv_last_error());
}

/* Whether c's tiles leave a partial tile at shape s. */
static bool partial_tile(const Tuner *t, int c, int s) {
    double batch, rows, cols, red;
    tune_stage_extents(&t->sp.stage, &t->shapes[s], &batch, &rows, &cols, &red);
    const TuneCand *x = &t->sp.cands[c];
    return fmod(rows, x->tile_i) != 0 || fmod(cols, x->tile_j) != 0;
}

/* The shapes to check candidate c at (indices into t->shapes): the
 * smallest of the range, and the smallest whose tiles differ from it in
 * leaving a partial tile (else the next smallest): small, so the
 * interpreter is quick, and with both kinds of tile where the range has
 * them. Returns how many (1 or 2). */
static int check_shapes(const Tuner *t, int c, int out[2]) {
    int first = 0;
    for (int s = 1; s < t->ns; s++)
        if (t->gflop[s] < t->gflop[first])
            first = s;
    out[0] = first;
    bool part = partial_tile(t, c, first);
    int next = -1;
    for (int pass = 0; pass < 2 && next < 0; pass++)
        for (int s = 0; s < t->ns; s++)
            if (s != first && (pass == 1 || partial_tile(t, c, s) != part) &&
                (next < 0 || t->gflop[s] < t->gflop[next]))
                next = s;
    if (next < 0)
        return 1;
    out[1] = next;
    return 2;
}

/* The interpreter's results at shape s, computed once per shape. */
static const rv_bindings *reference(Tuner *t, int s) {
    if (!t->refs[s] && tune_reference(t->m, &t->shapes[s], 7, &t->refs[s]) != RV_OK)
        fprintf(stderr, "ravel tune: the interpreter failed: %s\n", rv_last_error());
    return t->refs[s];
}

/* Notes a measurement of shape s (g GFLOP/s; 0: failed) for the curve. */
static void note_trial(Tuner *t, int s, double g) {
    TuneResult *r = t->res;
    if (r->ntrials == r->captrials) {
        r->captrials = r->captrials ? 2 * r->captrials : 64;
        r->trials = base_xrealloc(r->trials, sizeof *r->trials * (size_t)r->captrials);
    }
    r->trials[r->ntrials++] = (TuneTrial){s, g};
}

/* Marks candidate c failed (or wrong) and its pairs of the round not yet
 * measured failed, recording them with status st. */
static void mark_failed(Tuner *t, int c, const Pair *pairs, int n, TuneStatus st) {
    t->ok[c] = -1;
    for (int j = 0; j < n; j++)
        if (pairs[j].c == c && t->meas[c * t->ns + pairs[j].s] == 0) {
            t->meas[c * t->ns + pairs[j].s] = -1;
            t->res->measured++;
            note_trial(t, pairs[j].s, 0);
            record(t, c, pairs[j].s, 0, st, false);
        }
}

/* The batch's candidates are checked and timed in a child process
 * (child.c), which reports each step as a message; the parent applies
 * them to the tuner, so a candidate that crashes or hangs is marked
 * failed and the rest of the batch goes on in a fresh child. */
enum { MSG_CHECK, MSG_TIME, MSG_DONE };

typedef struct MeasureMsg {
    int kind;       /* MSG_*: a check's outcome, a timing, the candidate finished */
    int q;          /* the candidate's variant in the batch */
    int s;          /* MSG_TIME: the shape */
    int status;     /* rv_status of the run */
    int good;       /* MSG_CHECK: its outputs matched the interpreter's */
    double seconds; /* MSG_TIME: the time (tune_time_estimate) */
    char error[256]; /* rv_last_error() of a failed run */
} MeasureMsg;

typedef struct BatchRun {
    Tuner *t;
    TuneBatch *bt;
    const int *cands; /* candidate of each variant */
    int nc, start;    /* the child measures variants start..nc-1 */
    const Pair *pairs;
    int n;
    /* specialized: variant q is pairs[q].c compiled for shape pairs[q].s
     * alone, checked and timed there */
    bool spec;
} BatchRun;

/* RAVEL_TUNE_FAULT=abort:N or hang:N makes the N-th candidate this run
 * measures (0-based, in the order measured) abort or hang in the child:
 * the hook suite_tune.sh tests the isolation with. */
static void test_fault(long seq) {
    const char *f = getenv("RAVEL_TUNE_FAULT");
    const char *colon = f ? strchr(f, ':') : NULL;
    if (!colon || strtol(colon + 1, NULL, 10) != seq)
        return;
    if (strncmp(f, "abort:", 6) == 0)
        abort();
    if (strncmp(f, "hang:", 5) == 0)
        for (;;)
            pause();
}

static void send_msg(int fd, int kind, int q, int s, rv_status st, bool good, double sec) {
    MeasureMsg m = {.kind = kind, .q = q, .s = s, .status = st, .good = good, .seconds = sec};
    if (st != RV_OK)
        snprintf(m.error, sizeof m.error, "%s", rv_last_error());
    tune_child_send(fd, &m, sizeof m);
}

/* In the child: checks (first time) and times each candidate from
 * run->start on its pairs of the round. */
static void child_measure(int fd, void *user) {
    BatchRun *run = user;
    Tuner *t = run->t;
    int reps = t->o->repeats > 0 ? t->o->repeats : 5;
    for (int q = run->start; q < run->nc; q++) {
        int c = run->cands[q];
        test_fault(t->begun + q - run->start);
        if (run->spec) { /* a specialized variant runs at its own shape alone */
            int s = run->pairs[q].s;
            bool good = true;
            double sec = 0;
            rv_status st = tune_batch_check(run->bt, q, t->m, &t->shapes[s], 7, t->refs[s], &good);
            send_msg(fd, MSG_CHECK, q, s, st, good, 0);
            if (st == RV_OK && good) {
                st = tune_batch_time(run->bt, q, t->m, &t->shapes[s], reps, 0.02,
                                    tune_clock_for_threads(t->threads), &sec);
                send_msg(fd, MSG_TIME, q, s, st, true, sec);
            }
            send_msg(fd, MSG_DONE, q, 0, RV_OK, true, 0);
            continue;
        }
        if (t->ok[c] == 0) {
            int cs[2], ncs = check_shapes(t, c, cs);
            bool good = true;
            rv_status st = RV_OK;
            for (int k = 0; k < ncs && good && st == RV_OK; k++)
                st = t->refs[cs[k]] ? tune_batch_check(run->bt, q, t->m, &t->shapes[cs[k]], 7,
                                                        t->refs[cs[k]], &good)
                                    : base_error(RV_ERR_ARG, "the interpreter failed");
            send_msg(fd, MSG_CHECK, q, 0, st, good, 0);
            if (st != RV_OK || !good) {
                send_msg(fd, MSG_DONE, q, 0, RV_OK, true, 0);
                continue;
            }
        }
        for (int j = 0; j < run->n; j++)
            if (run->pairs[j].c == c) {
                double sec = 0;
                int s = run->pairs[j].s;
                rv_status st = tune_batch_time(run->bt, q, t->m, &t->shapes[s], reps, 0.02,
                                    tune_clock_for_threads(t->threads), &sec);
                send_msg(fd, MSG_TIME, q, s, st, true, sec);
            }
        send_msg(fd, MSG_DONE, q, 0, RV_OK, true, 0);
    }
}

/* A time of c at s (GFLOP/s g; -1 failed), of this code generator when
 * `current`: a candidate's times of this version at a shape are one
 * measurement, their best (the estimate of tune_time_estimate over more
 * runs); another version's is kept only where none of this one is, a
 * hint that is stale. */
static void note_time(Tuner *t, int c, int s, double g, bool current) {
    int i = c * t->ns + s;
    if (!current && t->nmeas[i] > 0)
        return;
    bool again = current && t->nmeas[i] > 0 && t->meas[i] > 0 && g > 0;
    t->meas[i] = again && t->meas[i] > g ? t->meas[i] : g;
    t->stale[i] = !current;
    t->nmeas[i] += current && t->nmeas[i] < 255;
}

/* A specialized measurement of c at s that failed (or was wrong). */
static void spec_failed(Tuner *t, int c, int s, TuneStatus st) {
    t->smeas[c * t->ns + s] = -1;
    record(t, c, s, 0, st, true);
}

/* In the parent: a message about a specialized variant. */
static void apply_spec_msg(Tuner *t, const BatchRun *run, const MeasureMsg *m) {
    int c = run->cands[m->q], s = run->pairs[m->q].s;
    if (m->kind == MSG_CHECK && (m->status != RV_OK || !m->good)) {
        /* the generic candidate was right: lowering for constant sizes is wrong */
        Buf d = {0}, sh = {0};
        tune_cand_describe(&t->sp.cands[c], &d);
        tune_shape_format(&t->shapes[s], t->m, &sh);
        fprintf(stderr, "ravel tune: BUG: candidate '%s' compiled for %s %s%s; its schedule:\n%s",
                buf_str(&d), buf_str(&sh),
                m->status != RV_OK ? "failed to run: " : "differs from the interpreter",
                m->status != RV_OK ? m->error : "", t->sp.cands[c].sched);
        buf_free(&d);
        buf_free(&sh);
        t->res->wrong += m->status == RV_OK;
        t->res->failed += m->status != RV_OK;
        spec_failed(t, c, s, m->status == RV_OK ? TUNE_STATUS_WRONG : TUNE_STATUS_FAILED);
    } else if (m->kind == MSG_TIME) {
        t->res->spec_measured++;
        if (m->status != RV_OK || m->seconds <= 0) {
            spec_failed(t, c, s, TUNE_STATUS_FAILED);
            return;
        }
        t->smeas[c * t->ns + s] = t->gflop[s] / m->seconds;
        record(t, c, s, m->seconds, TUNE_STATUS_OK, true);
    }
}

/* In the parent: what a message says, applied to the tuner. */
static void apply_msg(Tuner *t, const BatchRun *run, const MeasureMsg *m) {
    if (run->spec) {
        apply_spec_msg(t, run, m);
        return;
    }
    int c = run->cands[m->q];
    if (m->kind == MSG_CHECK) {
        if (m->status == RV_OK && m->good) {
            t->ok[c] = 1;
            return;
        }
        /* a legal schedule computes what the interpreter does: either is
         * a bug in ravel, reported with the schedule */
        Buf d = {0};
        tune_cand_describe(&t->sp.cands[c], &d);
        if (m->status != RV_OK)
            fprintf(stderr, "ravel tune: BUG: candidate '%s' failed to run: %s; its schedule:\n%s",
                    buf_str(&d), m->error, t->sp.cands[c].sched);
        else
            fprintf(stderr,
                    "ravel tune: BUG: candidate '%s' differs from the interpreter; its schedule:\n%s",
                    buf_str(&d), t->sp.cands[c].sched);
        buf_free(&d);
        t->res->wrong += m->status == RV_OK;
        t->res->failed += m->status != RV_OK;
        mark_failed(t, c, run->pairs, run->n,
                    m->status == RV_OK ? TUNE_STATUS_WRONG : TUNE_STATUS_FAILED);
        return;
    }
    if (m->kind != MSG_TIME)
        return;
    int s = m->s;
    t->res->measured++;
    if (m->status != RV_OK || m->seconds <= 0) {
        note_time(t, c, s, -1, true);
        note_trial(t, s, 0);
        record(t, c, s, 0, TUNE_STATUS_FAILED, false);
        return;
    }
    double g = t->gflop[s] / m->seconds;
    note_time(t, c, s, g, true);
    note_trial(t, s, g);
    if (g > t->best[s])
        t->best[s] = g;
    record(t, c, s, m->seconds, TUNE_STATUS_OK, false);
}

/* Checks and times the nc candidates of bt (variant q is cands[q]) on
 * their pairs of the round, in child processes: one per batch, and a
 * fresh one after a candidate that crashed or hung, which is reported
 * and recorded failed. */
static void measure_batch(Tuner *t, TuneBatch *bt, const int *cands, int nc, const Pair *pairs,
                          int n, bool spec) {
    /* the interpreter's results, computed here so every child has them */
    for (int q = 0; spec && q < nc; q++)
        reference(t, pairs[q].s);
    for (int q = 0; !spec && q < nc; q++)
        if (t->ok[cands[q]] == 0) {
            int cs[2], ncs = check_shapes(t, cands[q], cs);
            for (int k = 0; k < ncs; k++)
                reference(t, cs[k]);
        }
    double timeout = t->o->timeout > 0 ? t->o->timeout : 60;
    BatchRun run = {t, bt, cands, nc, 0, pairs, n, spec};
    while (run.start < nc) {
        TuneChild ch;
        if (tune_child_start(&ch, child_measure, &run) != RV_OK) {
            fprintf(stderr, "ravel tune: %s\n", rv_last_error());
            for (; run.start < nc; run.start++)
                mark_failed(t, cands[run.start], pairs, n, TUNE_STATUS_FAILED);
            return;
        }
        MeasureMsg m;
        Buf why = {0};
        int r = 1; /* what the last read said (1: a message; none read yet) */
        while (run.start < nc && (r = tune_child_read(&ch, &m, sizeof m, timeout, &why)) == 1) {
            if (m.q < run.start || m.q >= nc)
                continue; /* cannot happen: the child measures in order */
            apply_msg(t, &run, &m);
            if (m.kind == MSG_DONE) {
                run.start = m.q + 1;
                t->begun++;
            }
        }
        if (run.start < nc) {
            /* the candidate in progress crashed or hung: a bug in ravel
             * when it crashed, at least a candidate not worth its time */
            int c = cands[run.start];
            Buf d = {0};
            tune_cand_describe(&t->sp.cands[c], &d);
            fprintf(stderr, "ravel tune: %scandidate '%s' %s (recorded failed); its schedule:\n%s",
                    r == 0 ? "BUG: " : "", buf_str(&d), buf_str(&why), t->sp.cands[c].sched);
            buf_free(&d);
            t->res->failed++;
            if (spec)
                spec_failed(t, c, pairs[run.start].s, TUNE_STATUS_FAILED);
            else
                mark_failed(t, c, pairs, n, TUNE_STATUS_FAILED);
            run.start++;
            t->begun++;
        } else {
            tune_child_finish(&ch);
        }
        buf_free(&why);
    }
}

static void measure(Tuner *t, const Pair *pairs, int n) {
    int cands[64], nc = 0;
    for (int j = 0; j < n; j++) {
        bool seen = false;
        for (int q = 0; q < nc; q++)
            seen |= cands[q] == pairs[j].c;
        if (!seen && nc < 64)
            cands[nc++] = pairs[j].c;
    }
    const char *sch[64];
    for (int q = 0; q < nc; q++)
        sch[q] = t->sp.cands[cands[q]].sched;
    double t0 = rt_now_seconds();
    TuneBatch bt;
    rv_status st = tune_batch_compile(t->m, nc, sch, t->o->threads, &bt);
    if (st == RV_OK) {
        t->res->compile_seconds += rt_now_seconds() - t0;
        double t1 = rt_now_seconds();
        measure_batch(t, &bt, cands, nc, pairs, n, false);
        tune_batch_free(&bt);
        t->res->measure_seconds += rt_now_seconds() - t1;
        return;
    }
    /* one of them does not compile: compile each alone to find it */
    for (int q = 0; q < nc; q++) {
        double t2 = rt_now_seconds();
        st = tune_batch_compile(t->m, 1, &sch[q], t->o->threads, &bt);
        t->res->compile_seconds += rt_now_seconds() - t2;
        if (st != RV_OK) {
            fprintf(stderr, "ravel tune: candidate does not compile: %s\n", rv_last_error());
            t->res->failed++;
            mark_failed(t, cands[q], pairs, n, TUNE_STATUS_FAILED);
            continue;
        }
        double t1 = rt_now_seconds();
        measure_batch(t, &bt, &cands[q], 1, pairs, n, false);
        tune_batch_free(&bt);
        t->res->measure_seconds += rt_now_seconds() - t1;
    }
}

/* ---- specialized leaves ---- */

/* How much faster than the tree's kernel at a shape its best candidate
 * compiled for that shape alone must measure to get a leaf of its own:
 * above the noise of a time that is the fastest of its runs. */
#define SPEC_GAIN 1.03
/* Candidates measured specialized per shape: its best measured generic,
 * and the winners of the shapes near it (spec_cands). */
#define SPEC_CANDS 2
#define SPEC_NEAR 3
static int spec_best(const Tuner *t, int s, int *out);

/* The shapes that may get a specialized leaf, the most deserving first,
 * into out (at most max of them); how many. A leaf is exact (the
 * dispatcher tests every size for equality), so a shape deserves one
 * where it is frequent and where constant extents matter: a tile's tail
 * is a large part of a small output, so only shapes whose rows or columns
 * number at most 4 vectors are eligible, and of those the shapes the
 * search measured (the frequent ones get the measurements; a shape's
 * candidates to specialize are its best measured, which a resumed run
 * and `ravel build --records` find again in the records, where a
 * prediction would depend on the model's history), ranked by weight
 * (--shapes), then, where j's extent is a size, the shapes whose columns
 * are whole vectors (only there does a leaf's own space hold what the
 * generic one refuses: a tile padded over j, tune_space_add_leaf), then
 * by the odd part of the rows (times the columns where j's extent is a
 * size; smaller first: an extent 2^a * 3 splits into power-of-two tiles
 * and vectors with less tail than a prime one, so a constant one pays
 * most there; the symbolic tail is what a constant removes: bmm_nt's
 * T = 24, a 6 x 16 tile with a half-vector tail, 0.71x the same tile
 * compiled for 24), then smaller work first. Ragged rows and a recursion's levels are dispatched on a
 * quantity, not on sizes alone: none. */
static int spec_shapes(const Tuner *t, int *out, int max) {
    if (t->sp.stage.rows_uf || t->sp.stage.group ||
        rv_module_num_sizes(t->m) > RV_DISPATCH_MAX_CONDS)
        return 0;
    int n = 0;
    bool *whole = base_xcalloc((size_t)t->ns, sizeof *whole);
    int64_t *odd = base_xcalloc((size_t)t->ns, sizeof *odd);
    for (int s = 0; s < t->ns; s++) {
        double batch, rows, cols, red;
        tune_stage_extents(&t->sp.stage, &t->shapes[s], &batch, &rows, &cols, &red);
        if (fmin(rows, cols) <= 4.0 * t->lanes && t->best[s] > 0)
            out[n++] = s;
        whole[s] = t->sp.stage.n_extent == 0 && fmod(cols, t->lanes) == 0;
        /* of the extents a leaf makes constant: columns already are where
         * j's extent is (bmm_nn's 64 would rank every T >= 64 first) */
        odd[s] = (int64_t)(t->sp.stage.n_extent == 0 ? rows * cols : rows);
        while (odd[s] > 0 && odd[s] % 2 == 0)
            odd[s] /= 2;
    }
    for (int i = 0; i < n && i < max; i++) /* selection: the best of the rest at i */
        for (int j = i + 1; j < n; j++) {
            int a = out[i], b = out[j];
            if (t->w[b] != t->w[a] ? t->w[b] > t->w[a]
                : whole[b] != whole[a] ? whole[b]
                : odd[b] != odd[a]     ? odd[b] < odd[a]
                                       : t->gflop[b] < t->gflop[a])
                out[i] = b, out[j] = a;
        }
    base_free(odd);
    base_free(whole);
    return n < max ? n : max;
}

static int spec_count(const Tuner *t) {
    int want = t->o->specialize < 0 ? 0 : t->o->specialize > 0 ? t->o->specialize : TUNE_SPECIALIZE;
    return want < TUNE_MAX_SPEC ? want : TUNE_MAX_SPEC;
}

/* The best verified candidates measured at s (generic), best first, into
 * out (at most SPEC_CANDS), then the winners of the measured shapes near
 * s (near_shape), the nearest first, that are not among them (at most
 * SPEC_NEAR more); how many. Why the neighbours' winners: a kernel's
 * symbolic tail can cost it s while its constant form wins there, and
 * what wins beside s is the likeliest such kernel (bmm_nt's T = 24: the
 * dot product is its fastest generic kernel, the 6 x 16 tile that wins
 * T = 16 is faster compiled for 24, and is what the hand-written
 * schedule runs there). */
static int spec_cands(const Tuner *t, int s, int *out) {
    int n = spec_best(t, s, out);
    double *dist = base_xcalloc((size_t)t->ns, sizeof *dist);
    int *order = base_xcalloc((size_t)t->ns, sizeof *order), no = 0;
    for (int q = 0; q < t->ns; q++) {
        if (q == s || !near_shape(t, q, s))
            continue;
        dist[q] = 0;
        for (int i = 0; i < num_vars(t); i++)
            dist[q] += fabs(log(((double)t->shapes[q].v[i] + 1) / ((double)t->shapes[s].v[i] + 1)));
        int i = no++;
        for (; i > 0 && dist[order[i - 1]] > dist[q]; i--)
            order[i] = order[i - 1];
        order[i] = q;
    }
    for (int k = 0, added = 0; k < no && added < SPEC_NEAR; k++) {
        int win[SPEC_CANDS], nw = spec_best(t, order[k], win);
        bool have = nw == 0;
        for (int i = 0; i < n && !have; i++)
            have = out[i] == win[0];
        if (!have)
            out[n++] = win[0], added++;
    }
    base_free(order);
    base_free(dist);
    return n;
}

/* The best verified candidates measured at s (generic), best first, into
 * out (at most SPEC_CANDS); how many. */
static int spec_best(const Tuner *t, int s, int *out) {
    int n = 0;
    for (int c = 0; c < t->sp.len; c++) {
        if (t->ok[c] <= 0 || t->meas[c * t->ns + s] <= 0)
            continue;
        int i = n < SPEC_CANDS ? n++ : SPEC_CANDS;
        for (; i > 0 && t->meas[out[i - 1] * t->ns + s] < t->meas[c * t->ns + s]; i--)
            if (i < SPEC_CANDS)
                out[i] = out[i - 1];
        if (i < SPEC_CANDS)
            out[i] = c;
    }
    return n;
}

/* The leaf's own candidates measured per shape: legal at its constant
 * sizes alone (tune_space_add_leaf). */
#define SPEC_LEAF_CANDS 3
/* The most candidates a space holds (space.c's knobs: under 400). */
#define SPACE_MAX 1024

/* Builds the space of a leaf at shape s (tune_space_add_leaf): its
 * candidates legal at s alone are appended to t->sp (smeas grows with
 * them) and marked legal at s, and the records resume kept aside for
 * them at s are applied. */
static void leaf_space(Tuner *t, int s) {
    rv_variant_sizes at = shape_at(t, s);
    int *legal = base_xcalloc(SPACE_MAX, sizeof *legal);
    int before = t->sp.len + t->sp.nleaf;
    int n = tune_space_add_leaf(t->m, t->hw, &at, &t->sp, legal, SPACE_MAX);
    int after = t->sp.len + t->sp.nleaf;
    if (after > before) {
        size_t ns = (size_t)t->ns;
        t->smeas = base_xrealloc(t->smeas, sizeof *t->smeas * (size_t)after * ns);
        memset(&t->smeas[(size_t)before * ns], 0, sizeof *t->smeas * (size_t)(after - before) * ns);
        t->leaf_legal = base_xrealloc(t->leaf_legal, sizeof *t->leaf_legal * (size_t)t->sp.nleaf * ns);
        memset(&t->leaf_legal[(size_t)(before - t->sp.len) * ns], 0,
               sizeof *t->leaf_legal * (size_t)(after - before) * ns);
    }
    for (int k = 0; k < n; k++) {
        int c = legal[k];
        t->leaf_legal[(c - t->sp.len) * t->ns + s] = t->sp.cands[c].seed ? LEAF_SEED : LEAF_LEGAL;
        for (int i = 0; i < t->nleaf_recs; i++) {
            LeafRecord *r = &t->leaf_recs[i];
            if (r->s != s || strcmp(r->trace, t->sp.cands[c].sched) != 0)
                continue;
            t->smeas[c * t->ns + s] = r->g;
            t->res->spec_reused += r->g != 0;
            r->s = -1; /* applied */
        }
    }
    base_free(legal);
}

/* The leaves' spaces at the shapes that may get a leaf: every such shape
 * in a tuning run (spec_measure measures their best), those with records
 * of a leaf's own candidate in a replay (nothing is measured there). */
static void leaf_spaces(Tuner *t) {
    int *shapes = base_xcalloc((size_t)t->ns + 1, sizeof *shapes);
    int nsh = spec_shapes(t, shapes, spec_count(t));
    for (int i = 0; i < nsh; i++) {
        bool recorded = false;
        for (int k = 0; k < t->nleaf_recs; k++)
            recorded |= t->leaf_recs[k].s == shapes[i];
        if (!t->o->replay || recorded)
            leaf_space(t, shapes[i]);
    }
    base_free(shapes);
}

/* How a candidate of a leaf's own space stands at s before it is
 * measured: the best time at s of the verified generic candidates
 * nearest it (its template, the fewest knobs differing: the padded tile
 * is judged by the unpadded one measured there); 0 where none was. */
static double leaf_standing(const Tuner *t, int c, int s) {
    const TuneCand *x = &t->sp.cands[c];
    int nearest = TUNE_NPARAMS + 1;
    double g = 0;
    for (int q = 0; q < t->sp.len; q++) {
        const TuneCand *y = &t->sp.cands[q];
        double m = t->meas[q * t->ns + s];
        if (y->tmpl != x->tmpl || t->ok[q] <= 0 || m <= 0)
            continue;
        int d = 0;
        for (int k = 0; k < TUNE_NPARAMS; k++)
            d += y->p[k] != x->p[k];
        if (d < nearest || (d == nearest && m > g))
            nearest = d, g = m;
    }
    return g;
}

/* The leaf's own candidates to measure at s (legal there alone), into
 * out (at most SPEC_LEAF_CANDS); how many: the best standing first
 * (leaf_standing), a known-good sketch of the leaf's space first among
 * equals. */
static int spec_leaf_cands(const Tuner *t, int s, int *out) {
    int n = 0;
    double stand[SPEC_LEAF_CANDS];
    for (int c = t->sp.len; c < t->sp.len + t->sp.nleaf; c++) {
        unsigned char at = t->leaf_legal[(c - t->sp.len) * t->ns + s];
        if (at == 0)
            continue;
        /* a sketch ahead of an equal standing: a hair more */
        double g = leaf_standing(t, c, s) * (at == LEAF_SEED ? 1.0 + 1e-9 : 1.0);
        int i = n < SPEC_LEAF_CANDS ? n++ : SPEC_LEAF_CANDS;
        for (; i > 0 && stand[i - 1] < g; i--)
            if (i < SPEC_LEAF_CANDS)
                out[i] = out[i - 1], stand[i] = stand[i - 1];
        if (i < SPEC_LEAF_CANDS)
            out[i] = c, stand[i] = g;
    }
    return n;
}

/* Measures, compiled for their shape alone, the best candidates of each
 * shape that may get a specialized leaf and the best of the leaf's own
 * space (spec_leaf_cands), unless the records have them: the dispatcher
 * compares those times with its kernels' (a leaf is measured as it will
 * run). One program for all of them, each variant compiled for its
 * shape; one at a time where that does not compile. */
static void spec_measure(Tuner *t) {
    int *shapes = base_xcalloc((size_t)t->ns + 1, sizeof *shapes);
    int nsh = spec_shapes(t, shapes, spec_count(t));
    enum { MAXN = TUNE_MAX_SPEC * (SPEC_CANDS + SPEC_NEAR + SPEC_LEAF_CANDS) };
    Pair pairs[MAXN];
    int cands[MAXN], n = 0;
    for (int i = 0; i < nsh; i++) {
        int cs[SPEC_CANDS + SPEC_NEAR + SPEC_LEAF_CANDS], nc = spec_cands(t, shapes[i], cs);
        nc += spec_leaf_cands(t, shapes[i], &cs[nc]);
        for (int k = 0; k < nc; k++)
            if (t->smeas[cs[k] * t->ns + shapes[i]] == 0) {
                pairs[n] = (Pair){cs[k], shapes[i]};
                cands[n++] = cs[k];
            }
    }
    base_free(shapes);
    const char *sch[MAXN];
    rv_variant_sizes at[MAXN];
    for (int q = 0; q < n; q++) {
        sch[q] = t->sp.cands[cands[q]].sched;
        at[q] = shape_at(t, pairs[q].s);
    }
    /* all at once, or each alone when one of them does not compile */
    for (int q = 0, len = n; q < n; q += len, len = 1) {
        double t0 = rt_now_seconds();
        TuneBatch bt;
        rv_status st = tune_batch_compile_at(t->m, len, &sch[q], &at[q], t->o->threads, &bt);
        t->res->compile_seconds += rt_now_seconds() - t0;
        if (st != RV_OK && len > 1) {
            len = 0; /* the loop's step: q stays, one at a time from here */
            continue;
        }
        if (st != RV_OK) {
            fprintf(stderr, "ravel tune: candidate compiled for one shape does not compile: %s\n",
                    rv_last_error());
            t->res->failed++;
            spec_failed(t, cands[q], pairs[q].s, TUNE_STATUS_FAILED);
            continue;
        }
        double t1 = rt_now_seconds();
        measure_batch(t, &bt, &cands[q], len, &pairs[q], len, true);
        tune_batch_free(&bt);
        t->res->measure_seconds += rt_now_seconds() - t1;
    }
}

/* ---- records: resuming ---- */

/* Whether r is a record of this run's program, machine class and thread
 * count at one of its shapes: *s that shape, *c its candidate (-1: a
 * trace the generic space lacks, a leaf's). */
static bool record_pair(const Tuner *t, const TuneRecord *r, int *c, int *s) {
    int nsz = num_vars(t);
    /* a record without a count was measured on the shared pool */
    int rth = r->threads > 0 ? r->threads : t->cores_usable;
    if (strcmp(r->program, t->program) != 0 || strcmp(r->machine, buf_str(&t->machine)) != 0 ||
        r->nsizes != nsz || rth != t->threads)
        return false;
    *c = (int)((intptr_t)strmap_get(&t->by_sched, r->trace) - 1);
    /* the shape in the module's order (records sort it by name) */
    int64_t v[8];
    int found = 0;
    for (int q = 0; q < nsz; q++)
        for (int p = 0; p < nsz; p++)
            if (strcmp(r->size_names[p], var_name(t, q)) == 0)
                v[q] = r->size_values[p], found++;
    *s = found == nsz ? find_shape(t, v) : -1;
    return *s >= 0;
}

/* Why a record of this program, machine and thread count fits nothing
 * of it, else NULL: its sizes are not the program's, a value lies outside
 * its range, or its trace is no candidate of today's space (a hand-edited
 * or corrupted line; a specialized leaf's trace may lie outside the
 * generic space). A shape inside the range that this run does not tune
 * (--shapes) is no misfit. */
static const char *record_misfit(const Tuner *t, const TuneRecord *r) {
    int nsz = num_vars(t);
    if (r->nsizes != nsz)
        return "its shape does not name the program's size variables";
    for (int q = 0; q < nsz; q++) {
        int p = 0;
        while (p < nsz && strcmp(r->size_names[p], var_name(t, q)) != 0)
            p++;
        if (p == nsz)
            return "its shape does not name the program's size variables";
        int64_t lo, hi;
        const rv_size *sz = q < rv_module_num_sizes(t->m) ? rv_module_size_at(t->m, q) : NULL;
        if (!sz)
            quantity_range(t, &lo, &hi);
        else if (set_by_quantity(t, sz) || sz == quantity_carrier(t))
            continue; /* the binding of the quantity set it */
        else
            lo = sz->lo, hi = sz->hi;
        if (r->size_values[p] < lo || r->size_values[p] > hi)
            return "a size in its shape lies outside its range";
    }
    if (!r->spec && !strmap_get(&t->by_sched, r->trace))
        return "its trace is no candidate of this program";
    return NULL;
}

/* One warning for the records that fit nothing (record_misfit): skipped,
 * the first named by its line. */
static void warn_misfits(const Tuner *t, const TuneRecords *rs) {
    int n = 0, line = 0;
    const char *why = NULL;
    for (int i = 0; i < rs->len; i++) {
        const TuneRecord *r = &rs->data[i];
        int rth = r->threads > 0 ? r->threads : t->cores_usable;
        if (strcmp(r->program, t->program) != 0 || strcmp(r->machine, buf_str(&t->machine)) != 0 ||
            rth != t->threads)
            continue;
        const char *w = record_misfit(t, r);
        if (w && n++ == 0)
            why = w, line = r->line;
    }
    if (n)
        fprintf(stderr,
                "warning: %s:%d: skipped %d tuning record(s) of this program that fit it no "
                "more (the first, here: %s)\n",
                t->o->records, line, n, why);
}

static rv_status resume(Tuner *t) {
    if (!t->o->records)
        return RV_OK;
    TuneRecords rs;
    tune_records_init(&rs);
    rv_status st = tune_records_load(t->o->records, &rs);
    /* said even when quiet (ravel build --records): what was skipped of
     * the records changes what is built */
    if (st == RV_OK && rs.warnings.len)
        fprintf(stderr, "warning: %s", buf_str(&rs.warnings));
    if (st == RV_OK)
        warn_misfits(t, &rs);
    /* A replay measures nothing, so a record's key decides only where a
     * candidate has several generic times at a shape (the current one
     * wins); elsewhere its one time is used whatever its key, and no key
     * is made (lowering and emitting C, ~10 ms a candidate). */
    unsigned char *times = NULL;
    if (t->o->replay) {
        times = base_xcalloc((size_t)t->sp.len * (size_t)t->ns, 1);
        for (int i = 0; i < rs.len; i++) {
            int c, s;
            if (!rs.data[i].spec && record_pair(t, &rs.data[i], &c, &s) && c >= 0 &&
                times[c * t->ns + s] < 2)
                times[c * t->ns + s]++;
        }
    }
    for (int i = 0; st == RV_OK && i < rs.len; i++) {
        const TuneRecord *r = &rs.data[i];
        int c, s;
        if (!record_pair(t, r, &c, &s) || (c < 0 && !r->spec))
            continue;
        /* a time on another clock than this run's (a 1-thread record of
         * the wall clock, before "clock") is stale too: a wall time under
         * load is not comparable with a CPU time */
        bool current = times && (r->spec || times[c * t->ns + s] < 2)
                           ? true
                           : r->clock == tune_clock_for_threads(t->threads) &&
                                 tune_record_current(r, code_key(t, r->trace, s, r->spec));
        if (r->spec) { /* not a trial: a specialized leaf's, outside the budget */
            /* of other code than its own today: measured again (a leaf is chosen
             * by its time alone), unless nothing is measured (replay) */
            bool use = current || t->o->replay;
            double g =
                r->status == TUNE_STATUS_OK && r->seconds > 0 ? t->gflop[s] / r->seconds : -1;
            if (c < 0) { /* legal at its shape alone: its leaf's space holds it */
                t->leaf_recs = base_xrealloc(t->leaf_recs,
                                             sizeof *t->leaf_recs * (size_t)(t->nleaf_recs + 1));
                t->leaf_recs[t->nleaf_recs++] = (LeafRecord){base_xstrdup(r->trace), s, use ? g : 0};
                continue;
            }
            t->smeas[c * t->ns + s] = use ? g : 0;
            t->res->spec_reused += use;
            continue;
        }
        /* of other code than its own today: the model learns from it (features ->
         * time is still information), the dispatcher's choices are timed
         * again (retime_pairs) */
        t->res->stale += !current;
        if (r->status == TUNE_STATUS_OK && r->seconds > 0) {
            double g = t->gflop[s] / r->seconds;
            note_time(t, c, s, g, current);
            t->ok[c] = t->ok[c] < 0 ? -1 : 1;
            if (g > t->best[s])
                t->best[s] = g;
            note_trial(t, s, g);
        } else {
            note_time(t, c, s, -1, current);
            t->ok[c] = -1;
            note_trial(t, s, 0);
        }
        t->res->reused++;
    }
    base_free(times);
    tune_records_free(&rs);
    return st;
}

/* ---- progress ---- */

static void progress(Tuner *t, int round, int trials, const Pair *pairs, int npairs) {
    if (t->o->quiet)
        return;
    int done = t->res->measured + t->res->reused;
    double el = rt_now_seconds() - t->t0;
    double eta = t->res->measured > 0 ? el / t->res->measured * (trials - done) : 0;
    double lo = 1e30, logsum = 0;
    int n = 0;
    for (int s = 0; s < t->ns; s++)
        if (t->best[s] > 0) {
            lo = t->best[s] < lo ? t->best[s] : lo;
            logsum += log(t->best[s]);
            n++;
        }
    fprintf(stderr, "[tune] round %d: %d/%d trials, %d of %d shapes measured", round, done, trials,
            n, t->ns);
    if (n)
        fprintf(stderr, ", best GFLOP/s: min %.2f, geomean %.2f", lo, exp(logsum / n));
    fprintf(stderr, ", %.0fs elapsed, ETA %.0fs\n", el, eta > 0 ? eta : 0);
    /* the shapes of this round and their best so far */
    Buf b = {0};
    for (int j = 0; j < npairs; j++) {
        int s = pairs[j].s;
        bool first = true;
        for (int q = 0; q < j; q++)
            first &= pairs[q].s != s;
        if (!first)
            continue;
        buf_puts(&b, b.len ? ", " : "        ");
        tune_shape_format(&t->shapes[s], t->m, &b);
        buf_printf(&b, ": %.2f GFLOP/s", t->best[s]);
    }
    if (b.len)
        fprintf(stderr, "%s\n", buf_str(&b));
    buf_free(&b);
}

/* ---- the dispatcher ---- */

/* Why the votes bound a prediction by the measurements beside it: the
 * model learns throughput from features of every shape at once, and
 * where the records measured little it may predict a kernel several
 * times faster than it ran at the shapes on either side (dense 768x3072
 * + gelu at T = 16, between records at 13 and 17: kblock mr=12 nv=2
 * kc=64 predicted fastest, 3x slower than the tile measured best beside
 * it). A kernel's throughput changes smoothly between nearby shapes;
 * a prediction that jumps over both neighbours is the model's error. */
double tune_bounded_prediction(const double *own, const double *best, int ns, int s, double pred,
                               double slack) {
    if (own[s] > 0)
        return own[s];
    double bound = -1;
    for (int dir = -1; dir <= 1; dir += 2) {
        int q = s + dir;
        while (q >= 0 && q < ns && !(best[q] > 0))
            q += dir;
        if (q < 0 || q >= ns)
            continue;
        double b = own[q] > 0 ? slack * own[q] : best[q];
        if (b > bound)
            bound = b;
    }
    return bound >= 0 && pred > bound ? bound : pred;
}

/* How much faster than its own time at the nearest measured shapes a
 * kernel may be voted for at an unmeasured shape (tune_bounded_prediction):
 * VOTE_LOSS, the noise of a time and the trend of a smooth curve. */
#define VOTE_REACH 1.1

/* score() for the votes: a prediction bounded by the measurements beside
 * the shape. */
static double vote_score(const Tuner *t, int c, int s) {
    double g = t->meas[c * t->ns + s];
    if (g != 0 || !t->trained)
        return score(t, c, s);
    return tune_bounded_prediction(&t->meas[c * t->ns], t->best, t->ns, s,
                                   t->pred[c * t->ns + s], VOTE_REACH);
}

/* The best of the n candidates kept[] at shape s: where some of them were
 * measured at s, the best measured (a time beats a prediction: the
 * records are what the dispatcher answers for), else the best predicted.
 * The index into kept[]. */
static int best_kept(const Tuner *t, const int *kept, int n, int s) {
    int b = -1;
    bool measured = false;
    for (int k = 0; k < n; k++)
        measured |= t->meas[kept[k] * t->ns + s] > 0;
    for (int k = 0; k < n; k++) {
        if (measured && t->meas[kept[k] * t->ns + s] <= 0)
            continue;
        if (b < 0 || vote_score(t, kept[k], s) > vote_score(t, kept[b], s))
            b = k;
    }
    return b;
}

/* How much faster than the kept kernels a shape's own measured best must
 * be to get its vote back as one more kernel: the issue's bound on the
 * tuned kernel against per-shape tuning, and above the noise of a time
 * that is the fastest of its runs. */
#define VOTE_LOSS 1.1

/* The best measured throughput of a known-good sketch at s; 0 when none
 * was measured there. */
static double best_seed(const Tuner *t, int s) {
    double g = 0;
    for (int c = 0; c < t->sp.len; c++)
        if (t->sp.cands[c].seed && t->ok[c] > 0 && t->meas[c * t->ns + s] > g)
            g = t->meas[c * t->ns + s];
    return g;
}

/* Appends candidate c to the result's variants, compiled for shape s
 * alone (s >= 0: a specialized leaf) or for every shape (-1). */
static int add_variant(Tuner *t, int c, int s) {
    TuneResult *r = t->res;
    int k = r->nvariants++;
    r->variant_sched[k] = base_xstrdup(t->sp.cands[c].sched);
    Buf d = {0};
    tune_cand_describe(&t->sp.cands[c], &d);
    if (s >= 0) {
        r->variant_at[k] = shape_at(t, s);
        buf_puts(&d, " for ");
        tune_shape_format(&t->shapes[s], t->m, &d);
        r->nspec++;
    }
    r->variant_desc[k] = base_xstrdup(buf_str(&d));
    buf_free(&d);
    return k;
}

/* The specialized leaves: at each shape that may have one (spec_shapes),
 * the best of its candidates measured compiled for it alone, where that
 * beats the tree's kernel there by SPEC_GAIN; the dispatcher takes it at
 * exactly that shape, ahead of the tree, which was trained without them. */
static void spec_leaves(Tuner *t) {
    TuneResult *r = t->res;
    int *shapes = base_xcalloc((size_t)t->ns + 1, sizeof *shapes);
    int nsh = spec_shapes(t, shapes, spec_count(t));
    for (int i = 0; i < nsh && r->nvariants < TUNE_MAX_VARIANTS; i++) {
        int s = shapes[i], b = -1;
        for (int c = 0; c < t->sp.len + t->sp.nleaf; c++)
            if (t->smeas[c * t->ns + s] > 0 &&
                (b < 0 || t->smeas[c * t->ns + s] > t->smeas[b * t->ns + s]))
                b = c;
        if (b < 0 || t->smeas[b * t->ns + s] <= SPEC_GAIN * r->shape_gflops[s])
            continue;
        r->shape_variant[s] = add_variant(t, b, s);
        r->shape_gflops[s] = t->smeas[b * t->ns + s];
    }
    base_free(shapes);
}

/* The dispatcher's kernels into kept[] (at most TUNE_MAX_TREE_VARIANTS):
 * each shape's vote, merged to max_variants, plus the votes given back;
 * how many, or -1 (error set) when no candidate was measured correct.
 * Each shape s then runs kept[best_kept(t, kept, nk, s)]. */
static int pick_kernels(Tuner *t, int *kept) {
    int *vote = base_xcalloc((size_t)t->ns, sizeof *vote);
    int *all = base_xcalloc((size_t)t->sp.len, sizeof *all), nall = 0;
    for (int c = 0; c < t->sp.len; c++)
        if (t->ok[c] > 0)
            all[nall++] = c;
    for (int s = 0; s < t->ns; s++) {
        /* the best verified candidate: measured where any was, else predicted */
        int b = nall ? best_kept(t, all, nall, s) : -1;
        vote[s] = b >= 0 ? all[b] : -1;
        if (vote[s] < 0) {
            base_free(all);
            base_free(vote);
            base_error(RV_ERR_ARG, "no candidate was measured correct: raise --trials");
            return -1;
        }
    }
    base_free(all);
    /* merge: the kernels the most weight of shapes voted for */
    int maxv = t->o->max_variants > 0 ? t->o->max_variants : 4;
    double *wsum = base_xcalloc((size_t)t->sp.len, sizeof *wsum);
    for (int s = 0; s < t->ns; s++)
        wsum[vote[s]] += t->w[s];
    int nk = 0;
    while (nk < maxv && nk < TUNE_MAX_TREE_VARIANTS) {
        int b = -1;
        for (int c = 0; c < t->sp.len; c++)
            if (wsum[c] > 0 && (b < 0 || wsum[c] > wsum[b]))
                b = c;
        if (b < 0)
            break;
        kept[nk++] = b;
        wsum[b] = 0;
    }
    /* Never below a known-good sketch where the records show one, nor
     * far below the shape's own measured best: a shape whose kept kernels
     * all measured slower there than a sketch, or whose vote measured
     * more than VOTE_LOSS faster than the best kept kernel there, gets its
     * own vote back (the heaviest loss first; past max_variants, up to
     * TUNE_MAX_TREE_VARIANTS kernels). Without the second, bmm_nt's records
     * answered T = 16 and 64 with the dot product, 1.5-2x slower
     * there than the tile with B transposed in blocks measured at each:
     * that tile had the most votes of no merge, and dot is a sketch. */
    while (nk < TUNE_MAX_TREE_VARIANTS) {
        int worst = -1;
        double most = 0;
        for (int s = 0; s < t->ns; s++) {
            if (wsum[vote[s]] < 0)
                continue;
            /* (a kept kernel neither measured nor predicted here: none) */
            double have = fmax(vote_score(t, kept[best_kept(t, kept, nk, s)], s), 1e-12);
            double seed = best_seed(t, s), own = t->meas[vote[s] * t->ns + s];
            double loss = 0;
            if (seed > 0 && have < seed)
                loss = seed / have;
            if (own > VOTE_LOSS * have && own / have > loss)
                loss = own / have;
            if (loss > 0 && t->w[s] * loss > most)
                most = t->w[s] * loss, worst = s;
        }
        if (worst < 0)
            break;
        kept[nk++] = vote[worst];
        wsum[vote[worst]] = -1;
    }
    base_free(wsum);
    base_free(vote);
    return nk;
}

static rv_status dispatcher(Tuner *t) {
    TuneResult *r = t->res;
    int kept[TUNE_MAX_TREE_VARIANTS];
    int nk = pick_kernels(t, kept);
    if (nk < 0)
        return RV_ERR_ARG;
    r->nshapes = t->ns;
    r->shapes = base_xcalloc((size_t)t->ns, sizeof *r->shapes);
    r->shape_variant = base_xcalloc((size_t)t->ns, sizeof *r->shape_variant);
    r->shape_gflops = base_xcalloc((size_t)t->ns, sizeof *r->shape_gflops);
    int64_t *sizes = base_xcalloc((size_t)t->ns * 8, sizeof *sizes);
    int nsz = num_vars(t);
    for (int s = 0; s < t->ns; s++) {
        int b = best_kept(t, kept, nk, s);
        r->shapes[s] = t->shapes[s];
        r->shape_variant[s] = b;
        r->shape_gflops[s] = score(t, kept[b], s);
        memcpy(&sizes[(size_t)s * nsz], t->shapes[s].v, sizeof(int64_t) * (size_t)nsz);
        /* the tree reads the quantity, not the sizes it was drawn with
         * (the number of sequences of packed rows; N, B, _T_nbatch of
         * levels): a constant column is never split on */
        for (int i = 0; i < rv_module_num_sizes(t->m); i++)
            if (set_by_quantity(t, rv_module_size_at(t->m, i)))
                sizes[(size_t)s * nsz + i] = 0;
    }
    if (t->sp.stage.rows_uf)
        snprintf(r->sum_ufun, sizeof r->sum_ufun, "%s", rv_ufun_name(t->sp.stage.rows_uf));
    snprintf(r->quantity, sizeof r->quantity, "%s", t->sum_name);
    r->level_nodes = r->level_batches = -1;
    if (t->sp.stage.group) {
        r->level_nodes = t->sp.stage.group->st->nodes->id;
        r->level_batches = t->sp.stage.group->st->nbatch->id;
    }
    /* room for the specialized leaves after the tree's variants */
    r->variant_sched = base_xcalloc(TUNE_MAX_VARIANTS, sizeof(char *));
    r->variant_desc = base_xcalloc(TUNE_MAX_VARIANTS, sizeof(char *));
    r->variant_at = base_xcalloc(TUNE_MAX_VARIANTS, sizeof *r->variant_at);
    for (int k = 0; k < nk; k++)
        add_variant(t, kept[k], -1);
    rv_status st = tune_dtree_train(sizes, r->shape_variant, t->w, t->ns, nsz, 0, &r->tree);
    if (st == RV_OK)
        spec_leaves(t);
    base_free(sizes);
    return st;
}

/* ---- verifying the dispatcher's choices ---- */

/* Candidates measured at an unverified shape besides its dispatched
 * kernel: the best predicted verified ones never measured there. */
#define VERIFY_CANDS 2

/* The verification's budget of measurements left: --verify (default half
 * the trials) less what earlier runs of this code generator spent on it,
 * which the records hold as its measurements past the trial budget (stale
 * records fill the trial budget first: they were the search's). So a
 * resumed run spends only what is left, nothing where the first run
 * finished verifying, and a run over another version's records has the
 * whole budget to time the dispatcher's choices again. */
static int verify_budget(const Tuner *t, int trials) {
    int cap = t->o->verify < 0 ? 0 : t->o->verify > 0 ? t->o->verify : (trials + 1) / 2;
    int search = trials - t->res->stale;
    int spent = t->res->measured + t->res->reused - t->res->stale - (search > 0 ? search : 0);
    return cap - (spent > 0 ? spent : 0);
}

/* At most this many rivals of the dispatcher's kernel at a shape are
 * timed again where their times are stale (RETIMING). */
#define RETIME_RIVALS 2

/* The kernels that compete for the dispatcher at s into rival[]: its
 * choice first (kept[best_kept]), then the other kept kernels and the
 * best known-good sketch measured there (which pick_kernels weighs
 * against them), fastest measured first; how many. */
static int rivals(const Tuner *t, const int *kept, int nk, int s, int *rival) {
    int c = kept[best_kept(t, kept, nk, s)], nr = 0;
    rival[nr++] = c;
    for (int k = 0; k < nk; k++)
        if (kept[k] != c)
            rival[nr++] = kept[k];
    int seed = -1;
    for (int q = 0; q < t->sp.len; q++)
        if (t->sp.cands[q].seed && t->ok[q] > 0 && t->meas[q * t->ns + s] > 0 &&
            (seed < 0 || t->meas[q * t->ns + s] > t->meas[seed * t->ns + s]))
            seed = q;
    bool listed = seed < 0;
    for (int k = 0; k < nr && !listed; k++)
        listed = rival[k] == seed;
    if (!listed)
        rival[nr++] = seed;
    for (int k = 2; k < nr; k++) /* c stays first */
        for (int j = k; j > 1 && t->meas[rival[j - 1] * t->ns + s] < t->meas[rival[j] * t->ns + s];
             j--) {
            int x = rival[j];
            rival[j] = rival[j - 1];
            rival[j - 1] = x;
        }
    return nr;
}

/* RETIMING: at each shape (in order[0..ns)), the dispatcher's kernel and
 * up to RETIME_RIVALS of its measured rivals there whose times are
 * stale records (of other code than the kernel's today): pairs into pairs[n..), at most
 * `left`; the new n. Their times decide the dispatcher, and a stale time
 * may be 4x what the code runs in today; the rest of the stale records
 * stay hints for the model. */
static int retime_pairs(const Tuner *t, const int *kept, int nk, const int *order, Pair *pairs,
                        int n, int left) {
    int rival[TUNE_MAX_TREE_VARIANTS + 2];
    for (int i = 0; i < t->ns && n < left; i++) {
        int s = order[i], nr = rivals(t, kept, nk, s, rival);
        for (int k = 0, taken = 0; k < nr && taken <= RETIME_RIVALS && n < left; k++) {
            int q = rival[k];
            if (t->meas[q * t->ns + s] <= 0)
                continue;
            taken++;
            if (t->stale[q * t->ns + s])
                pairs[n++] = (Pair){q, s};
        }
    }
    return n;
}

/* CLOSE CALLS: at each shape (in order[0..ns)) where the dispatcher's
 * kernel and its fastest measured rival, both timed by this code
 * generator, are within TUNE_CLOSE_CALL, the one of them timed only once is
 * timed again (its best time counts, note_time): pairs into pairs[n..),
 * at most `left`; the new n. A decision by a few percent rests on two
 * timings of each, taken in different rounds, not on one lucky run. */
static int close_pairs(const Tuner *t, const int *kept, int nk, const int *order, Pair *pairs,
                       int n, int left) {
    int rival[TUNE_MAX_TREE_VARIANTS + 2];
    for (int i = 0; i < t->ns && n < left; i++) {
        int s = order[i], nr = rivals(t, kept, nk, s, rival), r = -1;
        for (int k = 1; k < nr && r < 0; k++)
            if (t->meas[rival[k] * t->ns + s] > 0)
                r = rival[k];
        int c = rival[0], ic = c * t->ns + s, ir = r * t->ns + s;
        if (r < 0 || t->meas[ic] <= 0 || t->stale[ic] || t->stale[ir])
            continue;
        double hi = fmax(t->meas[ic], t->meas[ir]), lo = fmin(t->meas[ic], t->meas[ir]);
        if (hi > TUNE_CLOSE_CALL * lo)
            continue;
        if (t->nmeas[ic] < 2 && n < left)
            pairs[n++] = (Pair){c, s};
        if (t->nmeas[ir] < 2 && n < left)
            pairs[n++] = (Pair){r, s};
    }
    return n;
}

/* Measures the n pairs in programs of at most `batch` candidates each. */
static void measure_chunked(Tuner *t, Pair *pairs, int n, int batch) {
    for (int i = 1; i < n; i++) /* by candidate: a chunk compiles each once */
        for (int j = i; j > 0 && pairs[j - 1].c > pairs[j].c; j--) {
            Pair x = pairs[j];
            pairs[j] = pairs[j - 1];
            pairs[j - 1] = x;
        }
    for (int i = 0; i < n;) {
        int j = i, nc = 0;
        for (; j < n && (j == i || pairs[j].c == pairs[j - 1].c || nc < batch); j++)
            nc += j == i || pairs[j].c != pairs[j - 1].c;
        measure(t, &pairs[i], j - i);
        i = j;
    }
}

/* The anchor shapes: a cover of the range at SKETCH_REACH (every shape
 * is near_shape to one of them), chosen heaviest first (--shapes
 * weights), then in the range's order: T = 1, 2, 4, 7, 11, 17, 26, 40,
 * 61, 92 over 1..128. How many, into out[] (room for every shape). */
static int anchor_shapes(const Tuner *t, int *out) {
    int *order = base_xcalloc((size_t)t->ns + 1, sizeof *order), n = 0;
    for (int s = 0; s < t->ns; s++) {
        int i = s;
        for (; i > 0 && t->w[order[i - 1]] < t->w[s]; i--)
            order[i] = order[i - 1];
        order[i] = s;
    }
    for (int i = 0; i < t->ns; i++) {
        bool covered = false;
        for (int j = 0; j < n && !covered; j++)
            covered = near_shape(t, out[j], order[i]);
        if (!covered)
            out[n++] = order[i];
    }
    base_free(order);
    return n;
}

/* KINDS: at each anchor shape, the best predicted candidate of each kind
 * (same_kind) of which no candidate has a current time there (a stale
 * one is of other code than the kind's today); at most `left`
 * pairs into pairs[] (room for anchors x kinds), anchors in
 * anchor_shapes' order. The search and the verification rank by the
 * model, which judges a kind by what it has seen of it, and at a shape
 * a measured time beats any prediction: a kind the model under-rates
 * never runs where it would win (bmm_nt's tile with B transposed in
 * blocks, the hand-written kernel, below the model's two best at T = 24
 * and 32, where the dot product measured 0.73x its time). Candidates
 * never run count (a kind's best tile may be one): measuring checks them
 * first. Whether a kind was measured at a shape is what the records say,
 * so a resumed run picks nothing its first run measured. */
static int kind_pairs(const Tuner *t, Pair *pairs, int left) {
    int *anchor = base_xcalloc((size_t)t->ns + 1, sizeof *anchor);
    int na = anchor_shapes(t, anchor), n = 0;
    for (int i = 0; i < na && n < left; i++) {
        int s = anchor[i];
        for (int k = 0; k < t->sp.len && n < left; k++) {
            /* k stands for its kind when it is the kind's first */
            bool first = true, seen = false;
            for (int c = 0; c < t->sp.len && first && !seen; c++)
                if (same_kind(t, c, k)) {
                    first = c >= k;
                    /* a stale time is of other code than the kind's today
                     * (a tile whose tail now stays in registers) */
                    seen = t->meas[c * t->ns + s] != 0 && !t->stale[c * t->ns + s];
                }
            if (!first || seen)
                continue;
            int b = -1;
            for (int c = k; c < t->sp.len; c++)
                if (same_kind(t, c, k) && t->ok[c] >= 0 &&
                    (b < 0 || t->pred[c * t->ns + s] > t->pred[b * t->ns + s]))
                    b = c;
            if (b >= 0)
                pairs[n++] = (Pair){b, s};
        }
    }
    base_free(anchor);
    return n;
}

/* The verified candidate never measured at s (or only stale: its time
 * is of other code), not among the n pairs, that the model predicts best
 * there; -1 when none. */
static int best_unmeasured(const Tuner *t, const Pair *pairs, int n, int s) {
    int b = -1;
    for (int q = 0; q < t->sp.len; q++) {
        bool taken = false;
        for (int j = 0; j < n; j++)
            taken |= pairs[j].c == q && pairs[j].s == s;
        if (!taken && t->ok[q] > 0 && (t->meas[q * t->ns + s] == 0 || t->stale[q * t->ns + s]) &&
            (b < 0 || t->pred[q * t->ns + s] > t->pred[b * t->ns + s]))
            b = q;
    }
    return b;
}

/* Inserts shape s into order[0..n) by key, largest first; n + 1. */
static int insert_by_key(int *order, int n, const double *key, int s) {
    int i = n;
    for (; i > 0 && key[order[i - 1]] < key[s]; i--)
        order[i] = order[i - 1];
    order[i] = s;
    return n + 1;
}

/* The shapes into order[0..ns), each next the one of most weight times
 * (1 + its distance, in the range's order, to those before it): of equal
 * weights T = 1, 128, 64, 32, 96, ... over 1..128. Why: retiming and close
 * calls take shapes in this order until the budget is spent, and in the
 * range's order a budget short of every shape never reached the large T
 * (dense 768x768's records kept a wall time under load at T = 128, 14.9
 * ms, for a kernel that runs 22 ms there: the dispatcher's choice). */
static void spread_order(const Tuner *t, int *order) {
    double *near = base_xcalloc((size_t)t->ns + 1, sizeof *near);
    bool *taken = base_xcalloc((size_t)t->ns + 1, sizeof *taken);
    for (int s = 0; s < t->ns; s++)
        near[s] = (double)t->ns;
    for (int i = 0; i < t->ns; i++) {
        int b = -1;
        for (int s = 0; s < t->ns; s++)
            if (!taken[s] && (b < 0 || t->w[s] * (near[s] + 1) > t->w[b] * (near[b] + 1)))
                b = s;
        order[i] = b;
        taken[b] = true;
        for (int s = 0; s < t->ns; s++)
            near[s] = fmin(near[s], fabs((double)(s - b)));
    }
    base_free(near);
    base_free(taken);
}

/* Verifies by measurement the kernel the dispatcher gives each shape: the
 * cost model voted where the records hold few measurements, and a vote
 * nobody timed may be a kernel that runs slower there than one the
 * records show (bmm_nt's dot product at T = 24, 32, 96). First the kinds
 * at the anchor shapes (kind_pairs), so that no kind is judged by the
 * model alone; then, in rounds: a shape whose dispatched kernel was
 * never measured there has it measured, with the VERIFY_CANDS best
 * predicted verified candidates never measured there; a shape whose
 * dispatched kernel was measured there, but where a verified candidate
 * never measured there is predicted more than VOTE_LOSS faster, has that
 * one measured (a time beats a prediction in the votes, so without the
 * challenge a kind measured near a shape but not at it could never take
 * it); then the model is refitted and the votes redone, in which a
 * measured time beats a prediction (best_kept), until neither remains or
 * the budget is spent (each round measures pairs never measured, so it
 * ends).
 * The shapes of most weight go first (--shapes frequencies), then those
 * furthest from the measured ones; challenges after them, the largest
 * predicted gain first. Only the state the records give back is ranked
 * (measured kinds, verified candidates), so a resumed run redoes the same
 * votes and measures nothing. */
static rv_status verify(Tuner *t, int trials, int batch) {
    int left = verify_budget(t, trials);
    int *order = base_xcalloc(2 * (size_t)t->ns + 1, sizeof *order);
    double *key = base_xcalloc((size_t)t->ns + 1, sizeof *key);
    int room = t->ns * (VERIFY_CANDS + RETIME_RIVALS + 2) + 1;
    if (room < t->ns * t->sp.len + 1)
        room = t->ns * t->sp.len + 1;
    Pair *pairs = base_xcalloc((size_t)room, sizeof *pairs);
    bool *none = base_xcalloc((size_t)t->ns + 1, sizeof *none);
    rv_status st = RV_OK;
    int before = t->res->measured;
    double t0 = rt_now_seconds();
    if (left > 0) {
        /* every candidate not known bad is ranked: a kind's best may never have run */
        t->npop = 0;
        for (int c = 0; c < t->sp.len; c++)
            if (t->ok[c] >= 0)
                t->pop[t->npop++] = c;
        st = predict(t);
        int n = st == RV_OK ? kind_pairs(t, pairs, left) : 0;
        if (n > 0) {
            left -= n;
            measure_chunked(t, pairs, n, batch);
            if ((st = train(t)) == RV_OK)
                st = predict(t);
        }
        t->res->kinds_measured = t->res->measured - before;
    }
    while (st == RV_OK && left > 0) {
        int kept[TUNE_MAX_TREE_VARIANTS];
        int nk = pick_kernels(t, kept);
        if (nk < 0)
            break; /* the dispatcher reports it */
        int nu = 0;
        /* the stale times that decide, heaviest shapes first, spread */
        spread_order(t, order);
        int n = retime_pairs(t, kept, nk, order, pairs, 0, left);
        t->res->retimed += n;
        int close = close_pairs(t, kept, nk, order, pairs, n, left);
        t->res->close_retimed += close - n;
        n = close;
        for (int s = 0; s < t->ns; s++) {
            int c = kept[best_kept(t, kept, nk, s)];
            if (t->meas[c * t->ns + s] != 0)
                continue;
            /* a kernel predicted far above what it or any measured beside
             * the shape (vote_score cut it) first: the model's doubt */
            double doubt = t->trained && vote_score(t, c, s) > 0
                               ? fmax(1, t->pred[c * t->ns + s] / vote_score(t, c, s))
                               : 1;
            key[s] = t->w[s] * (distance(t, s, none) + 1) * doubt;
            nu = insert_by_key(order + t->ns, nu, key, s);
        }
        for (int i = 0; i < nu && n < left; i++) {
            int s = order[t->ns + i], c = kept[best_kept(t, kept, nk, s)];
            pairs[n++] = (Pair){c, s};
            for (int k = 0; k < VERIFY_CANDS && n < left; k++) {
                int b = best_unmeasured(t, pairs, n, s);
                if (b < 0)
                    break;
                pairs[n++] = (Pair){b, s};
            }
        }
        /* the challenges */
        int nc = 0;
        for (int s = 0; s < t->ns; s++) {
            int c = kept[best_kept(t, kept, nk, s)];
            double have = t->meas[c * t->ns + s];
            /* not against a stale time: it is timed again first */
            int b = have > 0 && !t->stale[c * t->ns + s] ? best_unmeasured(t, pairs, n, s) : -1;
            if (b < 0 || t->pred[b * t->ns + s] <= VOTE_LOSS * have)
                continue;
            key[s] = t->w[s] * t->pred[b * t->ns + s] / have;
            nc = insert_by_key(order, nc, key, s);
        }
        for (int i = 0; i < nc && n < left; i++) {
            int b = best_unmeasured(t, pairs, n, order[i]);
            pairs[n++] = (Pair){b, order[i]};
        }
        if (n == 0)
            break; /* every dispatched kernel measured where it runs, unchallenged */
        left -= n;
        measure_chunked(t, pairs, n, batch);
        if ((st = train(t)) == RV_OK)
            st = predict(t);
    }
    t->res->verify_measured = t->res->measured - before;
    t->res->verify_seconds = rt_now_seconds() - t0;
    base_free(order);
    base_free(key);
    base_free(pairs);
    base_free(none);
    return st;
}

/* ---- the run ---- */

static void tuner_free(Tuner *t) {
    tune_space_free(&t->sp);
    base_free(t->shapes);
    base_free(t->w);
    base_free(t->feat);
    base_free(t->has_feat);
    base_free(t->gflop);
    base_free(t->ok);
    base_free(t->meas);
    base_free(t->smeas);
    base_free(t->leaf_legal);
    for (int i = 0; i < t->nleaf_recs; i++)
        base_free(t->leaf_recs[i].trace);
    base_free(t->leaf_recs);
    base_free(t->stale);
    base_free(t->nmeas);
    base_free(t->best);
    base_free(t->pred);
    base_free(t->pop);
    for (int s = 0; t->refs && s < t->ns; s++)
        rv_bindings_free(t->refs[s]);
    base_free(t->refs);
    tune_xgb_free(t->xgb);
    buf_free(&t->machine);
    strmap_free(&t->by_sched);
    strmap_free(&t->code_keys);
    arena_free(t->key_arena);
}

static rv_status setup(Tuner *t, const char *program_text) {
    rv_status st = tune_xgb_available();
    if (st != RV_OK)
        return st;
    if (rv_module_num_sizes(t->m) < 1 || rv_module_num_sizes(t->m) > 8)
        return base_error(RV_ERR_UNSUPPORTED,
                          "the program has %d size variables (1 to 8 are tuned)",
                          rv_module_num_sizes(t->m));
    st = tune_space_build(t->m, t->hw, &t->sp);
    if (st != RV_OK)
        return st;
    if (t->sp.stage.rows_uf)
        snprintf(t->sum_name, sizeof t->sum_name, "sum(%s)", rv_ufun_name(t->sp.stage.rows_uf));
    if (t->sp.stage.group)
        snprintf(t->sum_name, sizeof t->sum_name, "%s/%s", t->sp.stage.group->st->nodes->name,
                 t->sp.stage.group->st->nbatch->name);
    if (num_vars(t) > rv_module_num_sizes(t->m)) {
        if (num_vars(t) > 8)
            return base_error(RV_ERR_UNSUPPORTED, "the program has %d size "
                                                  "variables (1 to 7 when a quantity is tuned too)",
                              rv_module_num_sizes(t->m));
    }
    t->lanes = t->hw->vector_bytes > 0 ? t->hw->vector_bytes / (int)t->sp.stage.dsize : 1;
    const TuneOptions *o = t->o;
    default_shapes(t);
    if (o->shapes && o->nshapes > 0) {
        /* the workload's shapes weigh their frequency; the rest of the
         * range stays, at a hundredth of the rarest, so the dispatcher is
         * trained over the whole range while the effort follows the
         * workload */
        double rare = 1e300;
        for (int q = 0; q < o->nshapes; q++) {
            double wq = o->weights ? o->weights[q] : 1;
            rare = wq < rare ? wq : rare;
        }
        for (int s = 0; s < t->ns; s++)
            t->w[s] = rare / 100;
        if (o->shapes_only)
            t->ns = 0;
        t->shapes = base_xrealloc(t->shapes, sizeof *t->shapes * (size_t)(t->ns + o->nshapes));
        t->w = base_xrealloc(t->w, sizeof *t->w * (size_t)(t->ns + o->nshapes));
        for (int q = 0; q < o->nshapes; q++) {
            TuneShape sh = o->shapes[q];
            if (!quantity_shape(t, &sh))
                return base_error(RV_ERR_ARG,
                                  "shape %d: %s = %lld stands for %s, which does not "
                                  "fit the sizes' ranges",
                                  q + 1, rv_size_name(quantity_carrier(t)),
                                  (long long)o->shapes[q].v[quantity_carrier(t)->id],
                                  t->sum_name);
            int s = find_shape(t, sh.v);
            if (s < 0) {
                s = t->ns++;
                t->shapes[s] = sh;
            }
            t->w[s] = o->weights ? o->weights[q] : 1;
        }
    }
    if (t->ns == 0) /* a quantity no shape of the sizes' ranges can meet */
        return base_error(RV_ERR_UNSUPPORTED,
                          "no shape of the sizes' ranges gives %s a value "
                          "(nodes per level need N of at least %d)",
                          t->sum_name, TUNE_LEVELS);
    size_t cs = (size_t)t->sp.len * (size_t)t->ns;
    t->feat = base_xcalloc(cs * TUNE_F_COUNT, sizeof *t->feat);
    t->has_feat = base_xcalloc((size_t)t->sp.len, sizeof *t->has_feat);
    t->ok = base_xcalloc((size_t)t->sp.len, 1);
    t->meas = base_xcalloc(cs, sizeof *t->meas);
    t->smeas = base_xcalloc(cs, sizeof *t->smeas);
    t->stale = base_xcalloc(cs, sizeof *t->stale);
    t->nmeas = base_xcalloc(cs, sizeof *t->nmeas);
    t->pred = base_xcalloc(cs, sizeof *t->pred);
    t->best = base_xcalloc((size_t)t->ns, sizeof *t->best);
    t->gflop = base_xcalloc((size_t)t->ns, sizeof *t->gflop);
    t->refs = base_xcalloc((size_t)t->ns, sizeof *t->refs);
    for (int s = 0; s < t->ns; s++) {
        double batch, rows, cols, red;
        tune_stage_extents(&t->sp.stage, &t->shapes[s], &batch, &rows, &cols, &red);
        t->gflop[s] = 2e-9 * batch * rows * cols * red;
    }
    for (int c = 0; c < t->sp.len; c++)
        strmap_put(&t->by_sched, t->sp.cands[c].sched, (void *)(intptr_t)(c + 1));
    char hex[17];
    hash_hex(hash_str(program_text), hex);
    memcpy(t->program, hex, sizeof hex);
    tune_hw_machine_id(t->hw, &t->machine);
    XgbParams xp = {.rounds = 60, .max_depth = 5, .eta = 0.2, .nthread = 1, .seed = (int)o->seed};
    st = tune_xgb_new(&xp, &t->xgb);
    if (st != RV_OK)
        return st;
    t->occ_a = 1;
    t->occ_b = 0;
    t->rng = o->seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (!t->rng)
        t->rng = 1;
    t->pop = base_xcalloc((size_t)t->sp.len, sizeof *t->pop);
    return resume(t);
}

rv_status tune_run(rv_module *m, const char *program_text, const TuneOptions *opt,
                   TuneResult *out) {
    memset(out, 0, sizeof *out);
    Tuner t = {.m = m, .o = opt, .hw = tune_hw(), .res = out, .t0 = rt_now_seconds()};
    t.cores = t.cores_usable = t.hw->usable_cores > 0 ? t.hw->usable_cores : 1;
    if (opt->threads > 0 && opt->threads < t.cores)
        t.cores = opt->threads;
    t.threads = opt->threads > 0 ? opt->threads : t.cores_usable;
    rv_status st = setup(&t, program_text);
    int trials = opt->trials > 0 ? opt->trials : 64;
    int batch = opt->batch > 0 ? opt->batch : 8;
    if (batch > 64)
        batch = 64;
    /* room for the known-good sketches and as many others */
    int popsize = 32;
    for (int c = 0, seeds = 0; c < t.sp.len; c++)
        if (t.sp.cands[c].seed && 2 * ++seeds > popsize)
            popsize = 2 * seeds;
    if (popsize > t.sp.len)
        popsize = t.sp.len;
    if (st == RV_OK) {
        if (!opt->quiet)
            fprintf(stderr, "[tune] %s: %d candidates (%d refused by the checker), %d shapes, "
                            "%d trials (%d from the records)\n",
                    t.sp.stage.name, t.sp.len, t.sp.rejected, t.ns, trials, out->reused);
        evolve(&t, popsize);
        st = train(&t);
    }
    Pair pairs[64];
    if (st == RV_OK && opt->replay && out->reused == 0)
        st = base_error(RV_ERR_ARG,
                        "%s has no tuning records of this program (%s) on this machine class "
                        "(%s) at %d thread(s): run `ravel tune --threads %d` with --records first",
                        opt->records ? opt->records : "(no records file)", t.program,
                        buf_str(&t.machine), t.threads, t.threads);
    for (int round = 1; st == RV_OK && !opt->replay && out->measured + out->reused < trials;
         round++) {
        if ((st = predict(&t)) != RV_OK)
            break;
        int want = trials - out->measured - out->reused;
        int n = choose(&t, pairs, want < batch ? want : batch);
        if (n == 0)
            break; /* every candidate of the population measured everywhere */
        measure(&t, pairs, n);
        if ((st = train(&t)) != RV_OK || (st = predict(&t)) != RV_OK)
            break;
        evolve(&t, popsize);
        progress(&t, round, trials, pairs, n);
    }
    if (st == RV_OK) {
        /* the dispatcher ranks every verified candidate */
        t.npop = 0;
        for (int c = 0; c < t.sp.len; c++)
            if (t.ok[c] > 0)
                t.pop[t.npop++] = c;
        st = predict(&t);
    }
    if (st == RV_OK && !opt->replay)
        st = verify(&t, trials, batch);
    if (st == RV_OK)
        leaf_spaces(&t);
    if (st == RV_OK && !opt->replay)
        spec_measure(&t);
    if (st == RV_OK)
        st = dispatcher(&t);
    out->total_seconds = rt_now_seconds() - t.t0;
    out->key_seconds = t.key_seconds;
    out->nkeys = t.nkeys;
    tuner_free(&t);
    if (st != RV_OK)
        tune_result_free(out);
    return st;
}

/* The dispatcher with specialized leaves: each leaf's exact test, then
 * the tree (emitted as NAME_general_dispatch). */
static void spec_dispatch_c(const TuneResult *r, const char *const *vars, const char *name,
                            Buf *out) {
    Buf general = {0};
    buf_printf(&general, "%s_general", name);
    tune_dtree_emit_c(&r->tree, buf_str(&general), vars, (const char *const *)r->variant_desc, out);
    buf_printf(out,
               "\n/* %s_dispatch: the specialized leaves, each compiled for its sizes as\n"
               " * constants and taken at exactly those, then the tree above. */\n"
               "int %s_dispatch(const int64_t *sizes);\n"
               "int %s_dispatch(const int64_t *sizes) {\n",
               name, name, name);
    for (int k = r->nvariants - r->nspec; k < r->nvariants; k++) {
        const rv_variant_sizes *at = &r->variant_at[k];
        buf_puts(out, "    if (");
        for (int i = 0; i < at->nsizes; i++)
            buf_printf(out, "%ssizes[%d] == %lldLL", i ? " && " : "", i,
                       (long long)at->at[i].value);
        buf_printf(out, ")\n        return %d; /* %s */\n", k, r->variant_desc[k]);
    }
    buf_printf(out, "    return %s_dispatch(sizes);\n}\n", buf_str(&general));
    buf_free(&general);
}

void tune_result_dispatch_c(const TuneResult *r, rv_module *m, const char *name, Buf *out) {
    const char *vars[9];
    int n = rv_module_num_sizes(m);
    for (int i = 0; i < n && i < 8; i++)
        vars[i] = rv_size_name(rv_module_size_at(m, i));
    vars[n < 8 ? n : 8] = r->quantity;
    if (r->nspec > 0) { /* only for a stage dispatched on sizes alone (spec_shapes) */
        spec_dispatch_c(r, vars, name, out);
        return;
    }
    if (r->level_nodes < 0) {
        tune_dtree_emit_c(&r->tree, name, vars, (const char *const *)r->variant_desc, out);
        return;
    }
    /* nodes per level: the tree's last input, computed from the sizes */
    Buf inner = {0};
    buf_printf(&inner, "%s_levels", name);
    tune_dtree_emit_c(&r->tree, buf_str(&inner), vars, (const char *const *)r->variant_desc, out);
    buf_printf(out,
               "\n/* %s_dispatch: the tree above at the run's nodes per level (%s), the mean\n"
               " * of the levels' lengths: one choice per call. */\n"
               "int %s_dispatch(const int64_t *sizes);\n"
               "int %s_dispatch(const int64_t *sizes) {\n"
               "    int64_t x[%d];\n"
               "    for (int i = 0; i < %d; i++)\n"
               "        x[i] = sizes[i];\n"
               "    x[%d] = sizes[%d] / (sizes[%d] > 0 ? sizes[%d] : 1);\n"
               "    return %s_dispatch(x);\n}\n",
               name, r->quantity, name, name, n + 1, n, n, r->level_nodes, r->level_batches,
               r->level_batches, buf_str(&inner));
    buf_free(&inner);
}

int tune_result_pick(const TuneResult *r, const int64_t *sizes, int nsizes) {
    for (int k = r->nvariants - r->nspec; k < r->nvariants; k++) {
        const rv_variant_sizes *at = &r->variant_at[k];
        bool here = at->nsizes <= nsizes;
        for (int i = 0; here && i < at->nsizes; i++)
            here = sizes[i] == at->at[i].value;
        if (here)
            return k;
    }
    int64_t x[9] = {0};
    for (int i = 0; i < nsizes && i < 8; i++)
        x[i] = sizes[i];
    if (r->level_nodes >= 0) {
        int64_t nb = sizes[r->level_batches];
        x[nsizes] = sizes[r->level_nodes] / (nb > 0 ? nb : 1);
    } else if (r->sum_ufun[0]) {
        x[nsizes] = sizes[nsizes];
    }
    return tune_dtree_eval(&r->tree, x);
}

void tune_result_free(TuneResult *r) {
    for (int k = 0; k < r->nvariants; k++) {
        base_free(r->variant_sched[k]);
        base_free(r->variant_desc[k]);
    }
    base_free(r->variant_sched);
    base_free(r->variant_desc);
    base_free(r->variant_at);
    tune_dtree_free(&r->tree);
    base_free(r->shapes);
    base_free(r->shape_variant);
    base_free(r->shape_gflops);
    base_free(r->trials);
    memset(r, 0, sizeof *r);
}
