/*
 * bench/trees/trees_ravel_c.c — ravel's side of the trees benchmark through
 * its C API (include/ravel.h only), as a server written in C calls it: the
 * `ravel_c` side of `ravel bench trees`, driven over a pipe exactly as
 * dynet_cpp/trees_dynet.cc is (bench/trees/trees_ravel_c.py), so the two
 * sides without Python in the loop are timed the same way (issue 13).
 *
 *   trees_ravel_c [--threads T] [--states h,C] PROGRAM.rv STRUCTURE WEIGHTS_DIR
 *
 * Compiles PROGRAM.rv with T threads (rv_compile_options.threads; default
 * 1), loads every input of the program from WEIGHTS_DIR/<name>.npy
 * (trees_ref.save_weights' files; rv_npy_load), checked against its
 * declaration (dtype and rank here, extents by the first run), and binds them once, as a server
 * does: what the program derives from its params (packed weights) is made
 * at the first call and kept. STRUCTURE is the structure the batches bind
 * to; its batches are built as its declaration says (rv_structure_kind,
 * _max_children, _num_data: one data column, the word). Prints "ready
 * COMPILE_S", then reads commands on stdin, one reply line each on stdout:
 *
 *   batches FILE   read a list of batches (trees_dynet.cc's int32 stream,
 *                  trees_dynet_cpp.batch_stream) -> "ok NBATCHES"
 *   run I          one call on batch I, what a request costs a server:
 *                  build the batch's structures from its arrays
 *                  (rv_structs_add_many, every structure checked),
 *                  rv_linearize, bind the linearized batch over the bound
 *                  weights (rv_bindings_reset, rv_bindings_set_linear) and
 *                  run -> "BUILD_S LINEARIZE_S RUN_S" (seconds, measured
 *                  here; outputs stay in the linearized numbering)
 *   dump I FILE    run batch I and write the outputs named by --states
 *                  (default h), one after the other, as float32, row-major,
 *                  rows in the batch's numbering (structures concatenated,
 *                  nodes in their own numbering: lin.node_of maps them)
 *                  -> "ok"
 *
 * Every error (a missing or mis-shaped weight, a bad stream or command, a
 * structure the library refuses) ends the driver with "trees_ravel_c: ..."
 * on stderr and exit status 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <ravel.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("trees_ravel_c: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check(rv_status st, const char *what) {
    if (st != RV_OK)
        die("%s: %s", what, rv_last_error());
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the weights ---------------------------------------------------- */

/* Loads input t from dir/<name>.npy and checks its dtype and rank against
 * the declaration; its extents are checked by the first call's run, which
 * names the input (the public API has no per-input check of a lone array:
 * rv_bindings_load_weights does it for .npz and safetensors files). */
static rv_array *load_input(rv_bindings *b, const rv_tensor *t, const char *dir) {
    const char *name = rv_tensor_name(t);
    size_t n = strlen(dir) + strlen(name) + 6;
    char *path = xcalloc(n, 1);
    snprintf(path, n, "%s/%s.npy", dir, name);
    rv_array *a = NULL;
    if (rv_npy_load(path, &a) != RV_OK)
        die("weight %s: %s", name, rv_last_error());
    if (rv_array_dtype(a) != rv_tensor_dtype(t))
        die("weight %s: %s holds %s, the program declares %s", name, path,
            rv_dtype_name(rv_array_dtype(a)), rv_dtype_name(rv_tensor_dtype(t)));
    if (rv_array_ndim(a) != rv_tensor_ndim(t))
        die("weight %s: %s has %d dimensions, the program declares %d", name, path,
            rv_array_ndim(a), rv_tensor_ndim(t));
    check(rv_bindings_set_array(b, name, a), name);
    free(path);
    return a;
}

/* ---- the batches ------------------------------------------------------ */

/* One batch as a request brings it: rv_structs_add_many's arrays. */
typedef struct Batch {
    int count;
    int32_t *sizes, *begin, *child, *data;
    int64_t nbegin, nchild, ndata;
} Batch;

typedef struct Stream {
    const int32_t *v;
    size_t n, p;
    const char *path;
} Stream;

static int32_t next(Stream *s) {
    if (s->p >= s->n)
        die("%s: truncated batch stream", s->path);
    return s->v[s->p++];
}

static void free_batches(Batch *bt, int n) {
    for (int i = 0; i < n; i++) {
        free(bt[i].sizes);
        free(bt[i].begin);
        free(bt[i].child);
        free(bt[i].data);
    }
    free(bt);
}

/* Reads trees_dynet.cc's stream: NBATCHES, then per batch NSTRUCTS, per
 * structure N, NROOTS, ROOTS..., then per node WORD, NCHILD, CHILD...
 * Roots are not kept: a structure's root is the node no other lists as a
 * child (rv_structs checks there is one). Values the library checks when a
 * batch is built (children in range, ...) are left to it; counts are
 * checked here so the arrays can be sized. */
static Batch *read_batches(const char *path, int width, int *nbatches) {
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open %s", path);
    size_t cap = 1 << 16, n = 0, k;
    int32_t *v = xcalloc(cap, sizeof *v);
    while ((k = fread(v + n, sizeof *v, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            int32_t *w = realloc(v, 2 * cap * sizeof *v);
            if (!w)
                die("out of memory");
            v = w, cap *= 2;
        }
    }
    fclose(f);
    Stream s = {v, n, 0, path};
    int nb = next(&s);
    if (nb < 0 || (size_t)nb > n)
        die("%s: bad batch count %d", path, nb);
    Batch *out = xcalloc((size_t)nb, sizeof *out);
    for (int b = 0; b < nb; b++) {
        Batch *bt = &out[b];
        size_t start = s.p;
        bt->count = next(&s);
        if (bt->count < 1 || (size_t)bt->count > n)
            die("%s: batch %d: bad structure count %d", path, b, bt->count);
        /* first pass: sizes, to size the arrays */
        for (int j = 0; j < bt->count; j++) {
            int32_t nn = next(&s), nr = next(&s);
            if (nn < 1 || nr < 0 || (size_t)nn > n || (size_t)nr > n)
                die("%s: batch %d structure %d: bad node or root count", path, b, j);
            s.p += (size_t)nr;
            bt->nbegin += nn + 1;
            for (int32_t i = 0; i < nn; i++) {
                next(&s);
                int32_t nc = next(&s);
                if (nc < 0 || (size_t)nc > n)
                    die("%s: batch %d structure %d node %d: bad child count", path, b, j, (int)i);
                s.p += (size_t)nc;
                bt->nchild += nc;
                bt->ndata += width;
            }
        }
        bt->sizes = xcalloc((size_t)bt->count, sizeof(int32_t));
        bt->begin = xcalloc((size_t)bt->nbegin, sizeof(int32_t));
        bt->child = xcalloc((size_t)bt->nchild, sizeof(int32_t));
        bt->data = xcalloc((size_t)bt->ndata, sizeof(int32_t));
        s.p = start + 1;
        int64_t pb = 0, pc = 0, pd = 0;
        for (int j = 0; j < bt->count; j++) {
            int32_t nn = bt->sizes[j] = next(&s), nr = next(&s);
            s.p += (size_t)nr;
            int32_t at = 0;
            for (int32_t i = 0; i < nn; i++) {
                bt->begin[pb++] = at;
                int32_t word = next(&s), nc = next(&s);
                if (width == 1)
                    bt->data[pd++] = word;
                for (int32_t c = 0; c < nc; c++)
                    bt->child[pc++] = next(&s);
                at += nc;
            }
            bt->begin[pb++] = at;
        }
    }
    if (s.p != n)
        die("%s: trailing data", path);
    free(v);
    *nbatches = nb;
    return out;
}

/* ---- a call ----------------------------------------------------------- */

typedef struct Server {
    rv_program *prog;
    const char *structure;
    rv_bindings *weights, *call; /* bound once; a call's, reset per call */
    rv_structs *bs;
    rv_linear lin;
    Batch *batches;
    int nbatches;
} Server;

/* One call on batch i; times[3]: build, linearize, run (seconds). */
static void call(Server *sv, int i, double times[3]) {
    if (i < 0 || i >= sv->nbatches)
        die("no batch %d (%d loaded)", i, sv->nbatches);
    const Batch *bt = &sv->batches[i];
    double t0 = now();
    rv_structs_clear(sv->bs);
    check(rv_structs_add_many(sv->bs, bt->count, bt->sizes, bt->begin, bt->nbegin, bt->child,
                              bt->nchild, bt->ndata ? bt->data : NULL, bt->ndata),
          "rv_structs_add_many");
    double t1 = now();
    check(rv_linearize(sv->bs, &sv->lin), "rv_linearize");
    double t2 = now();
    check(rv_bindings_reset(sv->call, sv->weights), "rv_bindings_reset");
    check(rv_bindings_set_linear(sv->call, sv->structure, &sv->lin), "rv_bindings_set_linear");
    check(rv_program_run(sv->prog, sv->call), "rv_program_run");
    double t3 = now();
    times[0] = t1 - t0, times[1] = t2 - t1, times[2] = t3 - t2;
}

/* Writes the outputs named in `states` (comma-separated) of the last call,
 * rows mapped back to the batch's numbering. */
static void dump(Server *sv, const char *states, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot write %s", path);
    int32_t n = sv->lin.num_nodes;
    char *names = strdup(states), *save = NULL;
    for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const rv_array *a = rv_bindings_get_array(sv->call, name);
        if (!a || rv_array_dtype(a) != RV_F32 || rv_array_ndim(a) < 1 || rv_array_shape(a)[0] != n)
            die("dump: the program computes no f32 output %s with a row per node", name);
        size_t row = (size_t)(rv_array_numel(a) / n);
        const float *v = rv_array_cdata(a);
        float *out = xcalloc((size_t)n * row, sizeof(float));
        for (int32_t r = 0; r < n; r++)
            memcpy(out + (size_t)sv->lin.node_of[r] * row, v + (size_t)r * row, row * sizeof(float));
        if (fwrite(out, sizeof(float), (size_t)n * row, f) != (size_t)n * row)
            die("cannot write %s", path);
        free(out);
    }
    free(names);
    if (fclose(f) != 0)
        die("cannot write %s", path);
}

int main(int argc, char **argv) {
    int threads = 1, a = 1;
    const char *states = "h";
    for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        if (strcmp(argv[a], "--threads") == 0)
            threads = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--states") == 0)
            states = argv[a + 1];
        else
            die("unknown option %s", argv[a]);
    }
    if (argc - a != 3 || threads < 1)
        die("usage: trees_ravel_c [--threads T>=1] [--states h,C] PROGRAM.rv STRUCTURE WEIGHTS_DIR");
    Server sv = {.structure = argv[a + 1]};
    rv_module *m = NULL;
    check(rv_module_load(argv[a], &m), argv[a]);
    const rv_structure *st = rv_module_structure(m, sv.structure);
    if (!st)
        die("%s declares no structure %s", argv[a], sv.structure);
    int width = rv_structure_num_data(st);
    if (width > 1)
        die("structure %s has %d data columns; the batch stream has one (the word)", sv.structure,
            width);
    sv.bs = rv_structs_new(rv_structure_kind(st), rv_structure_max_children(st), width);
    if (!sv.bs)
        die("rv_structs_new: %s", rv_last_error());

    sv.weights = rv_bindings_new(m);
    sv.call = rv_bindings_new(m);
    int ntensors = rv_module_num_tensors(m), nw = 0;
    rv_array **w = xcalloc((size_t)ntensors, sizeof *w);
    for (int i = 0; i < ntensors; i++)
        if (rv_tensor_is_input(rv_module_tensor_at(m, i)))
            w[nw++] = load_input(sv.weights, rv_module_tensor_at(m, i), argv[a + 2]);

    double t = now();
    rv_compile_options opt = {.threads = threads};
    check(rv_program_compile(m, &opt, &sv.prog), "compiling");
    printf("ready %.6f\n", now() - t);
    fflush(stdout);

    char line[4096], arg[4096];
    while (fgets(line, sizeof line, stdin)) {
        int i;
        double tm[3];
        if (strspn(line, " \t\r\n") == strlen(line))
            continue; /* a blank line */
        if (sscanf(line, "batches %4095s", arg) == 1) {
            free_batches(sv.batches, sv.nbatches);
            sv.batches = read_batches(arg, width, &sv.nbatches);
            printf("ok %d\n", sv.nbatches);
        } else if (sscanf(line, "run %d", &i) == 1) {
            call(&sv, i, tm);
            printf("%.9g %.9g %.9g\n", tm[0], tm[1], tm[2]);
        } else if (sscanf(line, "dump %d %4095s", &i, arg) == 2) {
            call(&sv, i, tm);
            dump(&sv, states, arg);
            printf("ok\n");
        } else {
            die("unknown command: %s", line);
        }
        fflush(stdout);
    }
    free_batches(sv.batches, sv.nbatches);
    rv_linear_free(&sv.lin);
    rv_structs_free(sv.bs);
    rv_bindings_free(sv.call);
    rv_bindings_free(sv.weights);
    rv_program_free(sv.prog);
    for (int i = 0; i < nw; i++)
        rv_array_free(w[i]);
    free(w);
    rv_module_free(m);
    return 0;
}
