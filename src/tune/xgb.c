/*
 * xgb.c — the learned part of the tuner's cost model, f_MK in DietCode's
 * f_MK · f_occ · f_pad (§4.2): gradient-boosted regression trees over the
 * features of a micro-kernel, fitted to measured throughputs. DietCode and
 * TVM's cost models both use XGBoost; so do we, through its C API, rather
 * than writing a GBDT of our own.
 *
 * XGBoost is loaded with dlopen on first use, like NVRTC and the CUDA
 * driver (src/jit/cuda.c): ravel builds and runs everything but tuning
 * without it, and tuning then fails with a message naming the package. The
 * few C API functions we call are declared here by their stable C
 * signatures (XGBoost >= 1.4), so the build needs no XGBoost header either.
 *
 * Training fits a fresh model to all the data each time (as TVM's
 * XGBModel does): the data sets of a tuning run are small (thousands of
 * rows) and refitting keeps the model independent of the order of rounds.
 */
#include "tune/tune.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

typedef uint64_t XgbUlong; /* bst_ulong */
typedef void *XgbHandle;   /* DMatrixHandle, BoosterHandle */

static struct {
    void *lib;
    char version[32];
    void (*Version)(int *, int *, int *);
    const char *(*GetLastError)(void);
    int (*DMatrixCreateFromMat)(const float *, XgbUlong, XgbUlong, float, XgbHandle *);
    int (*DMatrixSetFloatInfo)(XgbHandle, const char *, const float *, XgbUlong);
    int (*DMatrixSetUIntInfo)(XgbHandle, const char *, const unsigned *, XgbUlong);
    int (*DMatrixFree)(XgbHandle);
    int (*BoosterCreate)(const XgbHandle *, XgbUlong, XgbHandle *);
    int (*BoosterFree)(XgbHandle);
    int (*BoosterSetParam)(XgbHandle, const char *, const char *);
    int (*BoosterUpdateOneIter)(XgbHandle, int, XgbHandle);
    int (*BoosterPredict)(XgbHandle, XgbHandle, int, unsigned, int, XgbUlong *, const float **);
    int (*BoosterSaveModel)(XgbHandle, const char *);
    int (*BoosterLoadModel)(XgbHandle, const char *);
    int (*BoosterGetNumFeature)(XgbHandle, XgbUlong *);
} xgb;

static pthread_mutex_t xgb_lock = PTHREAD_MUTEX_INITIALIZER;

#define XGB_MISSING_HINT                                                                           \
    "tuning needs XGBoost for its cost model: install the Debian package libxgboost-dev "          \
    "(`make deps` does), or set RAVEL_XGBOOST to the path of libxgboost.so"

/* Loads the library and its symbols; a failure is not cached, so a later
 * call (after installing, or with RAVEL_XGBOOST set) tries again. */
static rv_status load_locked(void) {
    if (xgb.lib)
        return RV_OK;
    const char *env = getenv("RAVEL_XGBOOST");
    /* libxgboost.so.0 is the runtime package's name; libxgboost.so the
     * development symlink (and what other distributions install). */
    const char *names[] = {env && env[0] ? env : "libxgboost.so.0",
                           env && env[0] ? NULL : "libxgboost.so"};
    void *lib = NULL;
    const char *why = "";
    for (int i = 0; i < 2 && !lib && names[i]; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            why = dlerror();
    }
    if (!lib)
        return base_error(RV_ERR_UNSUPPORTED, "%s (dlopen %s: %s)", XGB_MISSING_HINT, names[0],
                          why);
    struct {
        const char *name;
        void **slot;
    } syms[] = {
#define SYM(f) {"XG" #f, (void **)&xgb.f}
        {"XGBoostVersion", (void **)&xgb.Version},
        {"XGBGetLastError", (void **)&xgb.GetLastError},
        SYM(DMatrixCreateFromMat),
        SYM(DMatrixSetFloatInfo),
        SYM(DMatrixSetUIntInfo),
        SYM(DMatrixFree),
        SYM(BoosterCreate),
        SYM(BoosterFree),
        SYM(BoosterSetParam),
        SYM(BoosterUpdateOneIter),
        SYM(BoosterPredict),
        SYM(BoosterSaveModel),
        SYM(BoosterLoadModel),
        SYM(BoosterGetNumFeature),
#undef SYM
    };
    for (int i = 0; i < RV_COUNT(syms); i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (!*syms[i].slot) {
            dlclose(lib);
            return base_error(RV_ERR_UNSUPPORTED, "%s: %s is missing (XGBoost older than 1.4?); %s",
                              names[0], syms[i].name, XGB_MISSING_HINT);
        }
    }
    int major, minor, patch;
    xgb.Version(&major, &minor, &patch);
    snprintf(xgb.version, sizeof xgb.version, "%d.%d.%d", major, minor, patch);
    xgb.lib = lib;
    return RV_OK;
}

rv_status tune_xgb_available(void) {
    pthread_mutex_lock(&xgb_lock);
    rv_status st = load_locked();
    pthread_mutex_unlock(&xgb_lock);
    return st;
}

const char *tune_xgb_version(void) {
    return xgb.lib ? xgb.version : NULL;
}

/* XGBoost's own message for a failed call. */
static rv_status xgb_error(const char *what) {
    return base_error(RV_ERR_ARG, "xgboost: %s: %s", what, xgb.GetLastError());
}

struct XgbModel {
    XgbParams p;
    XgbHandle booster; /* NULL until trained or loaded */
    int ncols;
};

rv_status tune_xgb_new(const XgbParams *p, XgbModel **out) {
    *out = NULL;
    rv_status st = tune_xgb_available();
    if (st != RV_OK)
        return st;
    XgbModel *m = base_xcalloc(1, sizeof *m);
    if (p)
        m->p = *p;
    if (m->p.rounds <= 0)
        m->p.rounds = 100;
    if (m->p.max_depth <= 0)
        m->p.max_depth = 6;
    if (m->p.eta <= 0)
        m->p.eta = 0.3;
    if (!m->p.objective)
        m->p.objective = "reg:squarederror";
    *out = m;
    return RV_OK;
}

static rv_status set_params(XgbModel *m, XgbHandle b) {
    char depth[16], eta[32], nthread[16], seed[16];
    snprintf(depth, sizeof depth, "%d", m->p.max_depth);
    snprintf(eta, sizeof eta, "%.17g", m->p.eta);
    snprintf(nthread, sizeof nthread, "%d", m->p.nthread);
    snprintf(seed, sizeof seed, "%d", m->p.seed);
    const char *kv[][2] = {{"objective", m->p.objective},
                           {"max_depth", depth},
                           {"eta", eta},
                           {"seed", seed},
                           {"verbosity", "0"},
                           {"nthread", m->p.nthread > 0 ? nthread : NULL}};
    for (int i = 0; i < RV_COUNT(kv); i++)
        if (kv[i][1] && xgb.BoosterSetParam(b, kv[i][0], kv[i][1]) != 0)
            return xgb_error(kv[i][0]);
    return RV_OK;
}

static rv_status make_matrix(const float *x, int nrows, int ncols, XgbHandle *out) {
    if (nrows <= 0 || ncols <= 0)
        return base_error(RV_ERR_ARG,
                          "xgboost: need at least one row and one feature (got %d x %d)", nrows,
                          ncols);
    /* NaN marks a missing feature, as in XGBoost's own interfaces. */
    if (xgb.DMatrixCreateFromMat(x, (XgbUlong)nrows, (XgbUlong)ncols, NAN, out) != 0)
        return xgb_error("creating the feature matrix");
    return RV_OK;
}

rv_status tune_xgb_train(XgbModel *m, const float *x, int nrows, int ncols, const float *y,
                         const unsigned *groups, int ngroups) {
    XgbHandle d = NULL, b = NULL;
    rv_status st = make_matrix(x, nrows, ncols, &d);
    if (st != RV_OK)
        return st;
    if (xgb.DMatrixSetFloatInfo(d, "label", y, (XgbUlong)nrows) != 0)
        st = xgb_error("setting the targets");
    else if (groups && xgb.DMatrixSetUIntInfo(d, "group", groups, (XgbUlong)ngroups) != 0)
        st = xgb_error("setting the groups");
    else if (xgb.BoosterCreate(&d, 1, &b) != 0)
        st = xgb_error("creating the model");
    if (st == RV_OK)
        st = set_params(m, b);
    for (int i = 0; i < m->p.rounds && st == RV_OK; i++)
        if (xgb.BoosterUpdateOneIter(b, i, d) != 0)
            st = xgb_error("training");
    xgb.DMatrixFree(d);
    if (st != RV_OK) {
        if (b)
            xgb.BoosterFree(b);
        return st;
    }
    if (m->booster)
        xgb.BoosterFree(m->booster);
    m->booster = b;
    m->ncols = ncols;
    return RV_OK;
}

rv_status tune_xgb_predict(XgbModel *m, const float *x, int nrows, int ncols, float *out) {
    if (!m->booster)
        return base_error(RV_ERR_ARG, "xgboost: predict before the model was trained or loaded");
    if (ncols != m->ncols)
        return base_error(RV_ERR_ARG, "xgboost: predict with %d features; the model has %d", ncols,
                          m->ncols);
    XgbHandle d;
    rv_status st = make_matrix(x, nrows, ncols, &d);
    if (st != RV_OK)
        return st;
    XgbUlong len = 0;
    const float *res = NULL;
    /* option_mask 0: plain predictions; ntree_limit 0: all trees; not training. */
    if (xgb.BoosterPredict(m->booster, d, 0, 0, 0, &len, &res) != 0)
        st = xgb_error("predicting");
    else if (len != (XgbUlong)nrows)
        st = base_error(RV_ERR_ARG, "xgboost: %llu predictions for %d rows",
                        (unsigned long long)len, nrows);
    else
        memcpy(out, res, sizeof *out * (size_t)nrows);
    xgb.DMatrixFree(d);
    return st;
}

rv_status tune_xgb_save(XgbModel *m, const char *path) {
    if (!m->booster)
        return base_error(RV_ERR_ARG, "xgboost: save before the model was trained");
    if (xgb.BoosterSaveModel(m->booster, path) != 0)
        return base_error(RV_ERR_IO, "%s: cannot save the cost model: %s", path,
                          xgb.GetLastError());
    return RV_OK;
}

rv_status tune_xgb_load(const char *path, XgbModel **out) {
    XgbModel *m;
    rv_status st = tune_xgb_new(NULL, &m);
    if (st != RV_OK)
        return st;
    XgbUlong ncols = 0;
    if (xgb.BoosterCreate(NULL, 0, &m->booster) != 0)
        st = xgb_error("creating the model");
    else if (xgb.BoosterLoadModel(m->booster, path) != 0)
        st = base_error(RV_ERR_IO, "%s: cannot load a cost model: %s", path, xgb.GetLastError());
    else if (xgb.BoosterGetNumFeature(m->booster, &ncols) != 0)
        st = xgb_error("reading the model's feature count");
    if (st != RV_OK) {
        tune_xgb_free(m);
        return st;
    }
    m->ncols = (int)ncols;
    *out = m;
    return RV_OK;
}

void tune_xgb_free(XgbModel *m) {
    if (!m)
        return;
    if (m->booster)
        xgb.BoosterFree(m->booster);
    base_free(m);
}
