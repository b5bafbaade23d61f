/*
 * test_cuda.c — every example with a GPU schedule, through the CUDA back
 * end: CUDA C, PTX from NVRTC and, where a GPU is present, numbers.
 *
 * Each example's own schedule blocks (written for the CPU) are stripped
 * from its source, and a GPU schedule is added through the public API
 * (rv_module_schedule): the outer spatial axis bound to blocks, the inner
 * one split and bound to threads. Every kernel of the lowered module must
 * then generate CUDA C (cg_cuda_kernel) that NVRTC compiles to PTX with
 * the kernel's entry point. NVRTC is loaded with dlopen; where it is
 * absent the compile step is skipped with a message, and the generation
 * is still checked.
 *
 * What the CUDA back end cannot express yet must be refused with
 * RV_ERR_UNSUPPORTED and a message: device (scratch) allocations, extern
 * calls, bound loops whose extent depends on another loop, locals that
 * would need shared memory.
 *
 * The runtime's CUDA target: without a driver, rv_program_compile with
 * RV_TARGET_CUDA reports RV_ERR_UNSUPPORTED. With a device, each example
 * with its GPU schedule is written to a .rv file and checked end to end by
 * `ravel run --target cuda --check` (the compiled outputs against the
 * interpreter's); without one that part prints "skipped: no CUDA device".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "jit/jit.h"

/* ---- GPU schedules ---- */

/* A 1-D output over axis A: blocks of 128 threads. */
#define GPU_1D(A) "bo, bt = split(" A ", 128)\nbind(bo, \"blockIdx.x\")\nbind(bt, \"threadIdx.x\")"
/* A 2-D output over rows R and columns C: a row per blockIdx.y, the columns
 * in blocks of 128 threads. */
#define GPU_2D(R, C)                                                                               \
    "bind(" R ", \"blockIdx.y\")\nco, ct = split(" C ", 128)\nbind(co, \"blockIdx.x\")\n"          \
    "bind(ct, \"threadIdx.x\")"

typedef struct GpuSched {
    const char *tensor;
    const char *steps;
} GpuSched;

typedef struct Example {
    const char *file;
    GpuSched s[8]; /* one per computed tensor (and recursion group R) */
} Example;

/* A recursion's group schedule: the batches as launches or in one
 * persistent kernel; its members one node per block, one output per
 * thread. */
#define REC_GROUP(MODE) "dynamic_batch()\nspecialize()\ngpu_batches(\"" MODE "\")"
#define REC_NODE(A) "bind(n, \"blockIdx.x\")\nbind(" A ", \"threadIdx.x\")"
/* TreeLSTM (examples/tree_lstm.rv) with either group schedule. */
#define TREE_LSTM(MODE)                                                                            \
    {"tree_lstm.rv",                                                                               \
     {{"XIOU", GPU_2D("n", "g")},                                                                  \
      {"XF", GPU_2D("n", "i")},                                                                    \
      {"R", REC_GROUP(MODE)},                                                                      \
      {"hs", REC_NODE("i")},                                                                       \
      {"iou", REC_NODE("g")},                                                                      \
      {"c", REC_NODE("i")},                                                                        \
      {"h", REC_NODE("i")},                                                                        \
      {"Out", GPU_2D("s", "i")}}}

// clang-format off
static const Example examples[] = {
    /* Y: 16 x 16 tiles of X and W in shared memory per step of k, filled
     * by the block's threads (one element each) between barriers */
    {"batch_matmul.rv", {
        {"Y", "io, ii = split(i, 16)\njo, ji = split(j, 16)\nko, ki = split(k, 16)\n"
              "reorder(b, io, jo, ko, ii, ji, ki)\nXS = cache_read(X)\nWS = cache_read(W)\n"
              "compute_at(XS, ko)\ncompute_at(WS, ko)\n"
              "bind(b, \"blockIdx.z\")\nbind(io, \"blockIdx.y\")\nbind(jo, \"blockIdx.x\")\n"
              "bind(ii, \"threadIdx.y\")\nbind(ji, \"threadIdx.x\")"},
        {"XS", "bind(i, \"threadIdx.y\")\nbind(k, \"threadIdx.x\")"},
        {"WS", "bind(j, \"threadIdx.y\")\nbind(k, \"threadIdx.x\")"},
        {"Z", "io, ii = split(i, 4, tail=\"guard\")\nbind(b, \"blockIdx.y\")\n"
              "bind(io, \"blockIdx.x\")\nbind(ii, \"threadIdx.y\")\nbind(d, \"threadIdx.x\")"}}},
    /* register tiles: 4 x 4 sums per thread (YL), the tiles of X and W
     * per step of k filled by the block's threads together (cooperative
     * copies computed at YL's k loop, inside the thread loops) */
    {"dense_gelu.rv", {
        {"Y", "YL = cache_write(Y, \"local\", pad=1)\nio, ii = split(i, 64)\n"
              "jo, ji = split(j, 64)\nty, ri = split(ii, 4)\ntx, rj = split(ji, 4)\n"
              "reorder(io, jo, ty, tx, ri, rj)\nbind(io, \"blockIdx.y\")\n"
              "bind(jo, \"blockIdx.x\")\nbind(ty, \"threadIdx.y\")\nbind(tx, \"threadIdx.x\")\n"
              "compute_at(YL, tx)"},
        {"YL", "ko, ki = split(k, 16)\nreorder(ko, ki, i, j)\nunroll(i)\nunroll(j)\n"
               "XS = cache_read(X, pad=1)\nWS = cache_read(W, pad=1)\ncompute_at(XS, ko)\n"
               "compute_at(WS, ko)"},
        {"XS", "i2, iy = split(i, 16)\nreorder(i2, iy, k)\nbind(iy, \"threadIdx.y\")\n"
               "bind(k, \"threadIdx.x\")"},
        {"WS", "j2, jy = split(j, 16)\nreorder(j2, jy, k)\nbind(jy, \"threadIdx.y\")\n"
               "bind(k, \"threadIdx.x\")"}}},
    {"embedding.rv", {{"H", GPU_2D("n", "i")}}},
    {"layernorm.rv", {{"Mean", GPU_1D("i")}, {"D", GPU_2D("i", "k")},
                      {"Var", GPU_1D("i")}, {"Y", GPU_2D("i", "j")}}},
    /* ragged rows: a sequence per block, its elements strided over 32
     * threads (the thread loop's extent must not depend on b) */
    {"ragged_elementwise.rv", {
        {"O", "bind(b, \"blockIdx.x\")\nlo, lt = split(l, 32, tail=\"guard\")\n"
              "bind(lt, \"threadIdx.x\")"}}},
    {"ragged_softmax.rv", {
        {"M", "bind(b, \"blockIdx.y\")\nbind(h, \"blockIdx.x\")\n"
              "io, it = split(i, 32, tail=\"guard\")\nbind(it, \"threadIdx.x\")"},
        {"E", "bind(b, \"blockIdx.y\")\nbind(h, \"blockIdx.x\")\n"
              "jo, jt = split(j, 32, tail=\"guard\")\nbind(jt, \"threadIdx.x\")"},
        {"Z", "bind(b, \"blockIdx.y\")\nbind(h, \"blockIdx.x\")\n"
              "io, it = split(i, 32, tail=\"guard\")\nbind(it, \"threadIdx.x\")"},
        {"P", "bind(b, \"blockIdx.y\")\nbind(h, \"blockIdx.x\")\n"
              "jo, jt = split(j, 32, tail=\"guard\")\nbind(jt, \"threadIdx.x\")"}}},
    {"softmax.rv", {{"M", GPU_1D("i")}, {"E", GPU_2D("i", "j")},
                    {"S", GPU_1D("i")}, {"P", GPU_2D("i", "j")}}},
    {"tree_rnn.rv", {{"Leaf", GPU_2D("n", "i")}, {"Internal", GPU_2D("n", "i")}}},
    {"tree_rnn_cond.rv", {{"H", GPU_2D("n", "i")}}},
    {"trmm.rv", {{"C", GPU_2D("i", "j")}}},
    /* recursion (docs/recursion.md, "CUDA"): each group schedule, every
     * shape of random structures */
    {"tree_rnn_rec.rv", {{"R", REC_GROUP("launch")}, {"h", REC_NODE("i")},
                         {"Out", GPU_2D("s", "i")}}},
    {"tree_rnn_rec.rv", {{"R", REC_GROUP("persistent")}, {"h", REC_NODE("i")},
                         {"Out", GPU_2D("s", "i")}}},
    /* four nodes per block: the grid's extent a let of the batch's length */
    {"tree_rnn_rec.rv", {{"R", REC_GROUP("launch")},
                         {"h", "no, ni = split(n, 4)\nreorder(no, ni, i)\n"
                               "bind(no, \"blockIdx.x\")\nbind(ni, \"threadIdx.y\")\n"
                               "bind(i, \"threadIdx.x\")"},
                         {"Out", GPU_2D("s", "i")}}},
    TREE_LSTM("launch"),
    TREE_LSTM("persistent"),
};
// clang-format on

/* The source of an example without its schedule blocks (from a line
 * starting "schedule " to the next line starting "}"). Caller frees. */
static char *strip_schedules(const char *text) {
    Buf b = {0};
    bool in = false;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);
        if (strncmp(p, "schedule ", 9) == 0)
            in = true;
        if (!in)
            buf_printf(&b, "%.*s", (int)n, p);
        else if (*p == '}')
            in = false;
        p += n;
    }
    return buf_take(&b);
}

/* The example's module, its CPU schedules stripped and its GPU schedules
 * added (or, with `cpu`, as written); NULL on failure (checked). */
static rv_module *load_example(const Example *ex, bool cpu) {
    char path[PATH_MAX], *text = NULL, *src = NULL;
    size_t len;
    snprintf(path, sizeof path, "examples/%s", ex->file);
    rv_module *m = NULL;
    CHECK_EQ_INT(base_read_file(path, &text, &len), RV_OK);
    if (!text)
        return NULL;
    src = cpu ? base_xstrdup(text) : strip_schedules(text);
    rv_status st = rv_module_parse(path, src, &m);
    CHECK_EQ_INT(st, RV_OK);
    for (int i = 0; st == RV_OK && !cpu && i < RV_COUNT(ex->s) && ex->s[i].tensor; i++) {
        st = rv_module_schedule(m, ex->s[i].tensor, ex->s[i].steps);
        CHECK_EQ_INT(st, RV_OK);
    }
    if (st == RV_OK)
        st = rv_module_check_schedule(m);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s: %s\n", ex->file, rv_last_error());
        rv_module_free(m);
        m = NULL;
    }
    base_free(src);
    base_free(text);
    return m;
}

/* The GPU dimensions a launch uses, as "grid(x,y) block(x)". */
/* lower_module and the passes that make its kernels loop IR code
 * generation takes (reductions initialised, run-time checks, flat storage
 * offsets), without the optimizing ones. */
static rv_status lower_flat(rv_module *m, Kernel ***ks, int *n) {
    static const char *const needed[] = {"reduce", "checks", "flatten"};
    rv_status st = lower_module(m, ks, n);
    for (int k = 0; st == RV_OK && k < *n; k++)
        for (int i = 0; st == RV_OK && i < (int)RV_COUNT(needed); i++)
            st = lower_run_pass((*ks)[k], needed[i]);
    return st;
}

static void describe_launch(Buf *b, const CgLaunch *l) {
    static const char xyz[] = "xyz";
    buf_puts(b, "grid(");
    for (int d = 0, n = 0; d < 3; d++)
        if (l->grid[d])
            buf_printf(b, "%s%c", n++ ? "," : "", xyz[d]);
    buf_puts(b, ") block(");
    for (int d = 0, n = 0; d < 3; d++)
        if (l->block[d])
            buf_printf(b, "%s%c", n++ ? "," : "", xyz[d]);
    buf_putc(b, ')');
}

/* Every kernel of every example: CUDA C with bound indices, then PTX. */
static void test_examples_to_ptx(void) {
    bool nvrtc = jit_nvrtc_available();
    if (!nvrtc)
        printf("skipped NVRTC compiles: %s\n", rv_last_error());
    for (int x = 0; x < RV_COUNT(examples); x++) {
        const Example *ex = &examples[x];
        rv_module *m = load_example(ex, false);
        if (!m)
            continue;
        Kernel **ks = NULL;
        int n = 0;
        rv_status st = lower_flat(m, &ks, &n);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "    %s: %s\n", ex->file, rv_last_error());
        for (int k = 0; k < n; k++) {
            char *src = NULL, *sym = NULL, *ptx = NULL;
            CgLaunch l;
            st = cg_cuda_kernel(ks[k], &src, &sym, &l);
            CHECK_EQ_INT(st, RV_OK);
            if (st != RV_OK) {
                fprintf(stderr, "    %s, kernel %s: %s\n", ex->file, ks[k]->name, rv_last_error());
                continue;
            }
            if (getenv("RAVEL_TEST_SHOW"))
                printf("%s\n", src);
            /* every kernel is spread over blocks and threads (a persistent
             * one over what the device holds at once) */
            CHECK((l.grid[0] != NULL || l.persistent) && l.block[0] != NULL);
            CHECK_STR_CONTAINS(src, "blockIdx.");
            CHECK_STR_CONTAINS(src, "threadIdx.x");
            Buf d = {0};
            describe_launch(&d, &l);
            if (nvrtc) {
                st = jit_nvrtc_compile(src, NULL, &ptx);
                CHECK_EQ_INT(st, RV_OK);
                if (st != RV_OK) {
                    fprintf(stderr, "    %s, kernel %s: %s\n%s\n", ex->file, ks[k]->name,
                            rv_last_error(), src);
                } else {
                    char entry[300];
                    snprintf(entry, sizeof entry, ".entry %s(", sym);
                    CHECK_STR_CONTAINS(ptx, entry);
                    for (int i = 0; i < l.nfns; i++) { /* a recursion's launches */
                        snprintf(entry, sizeof entry, ".entry %s(", l.fns[i].sym);
                        CHECK_STR_CONTAINS(ptx, entry);
                    }
                }
            }
            printf("%s: kernel %s: %s%s\n", ex->file, ks[k]->name, buf_str(&d), ptx ? ", PTX" : "");
            buf_free(&d);
            cg_cuda_launch_free(&l);
            base_free(ptx);
            base_free(src);
            base_free(sym);
        }
        base_free(ks);
        rv_module_free(m);
    }
}

/* The example `file` of the table with its GPU schedule. */
static rv_module *load_named(const char *file) {
    for (int x = 0; x < RV_COUNT(examples); x++)
        if (strcmp(examples[x].file, file) == 0)
            return load_example(&examples[x], false);
    RV_ASSERT(!"no such example");
    return NULL;
}

/* A split with a GPU-bound part keeps its guard even with the default
 * tail mode (partition): a partitioned last tile would put a thread loop
 * of extent N - N/128*128 in the kernel, which cannot size the launch. The
 * grid covers the last tile, whose threads past N idle at the guard. */
static void test_gpu_split_keeps_guard(void) {
    rv_module *m = load_named("trmm.rv");
    if (!m)
        return;
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_flat(m, &ks, &n), RV_OK);
    CHECK_EQ_INT(n, 1);
    char *src = NULL, *sym = NULL;
    CgLaunch l;
    if (n == 1 && cg_cuda_kernel(ks[0], &src, &sym, &l) == RV_OK) {
        CHECK_STR_CONTAINS(src, "            if (ct < 128) {\n"
                                "                if (co * 128 + ct < N) {\n");
        CHECK(!strstr(src, "N % 128"));
        CHECK_STR_CONTAINS(src, "Launch: grid ((N + 127) / 128, N, 1), block (128, 1, 1)");
        char *g = ir_expr_str(l.grid[0]);
        CHECK_STR_CONTAINS(g, "(N + 127) / 128");
        base_free(g);
    } else {
        CHECK(!"trmm: cg_cuda_kernel failed");
    }
    base_free(src);
    base_free(sym);
    base_free(ks);
    rv_module_free(m);
}

/* A tile that a block's threads fill together lives in shared memory,
 * with a barrier between the fills and the reads, and one before the next
 * step's fills (the last step's readers must be done). */
static void test_shared_tiles(void) {
    rv_module *m = load_named("batch_matmul.rv");
    if (!m)
        return;
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_pipeline(m, &ks, &n), RV_OK); /* as compiled */
    char *src = NULL, *sym = NULL;
    if (n >= 1 && cg_cuda_kernel(ks[0], &src, &sym, NULL) == RV_OK) {
        const char *xs = strstr(src, "__shared__ float XS[256];");
        const char *ws = strstr(src, "__shared__ float WS[256];");
        CHECK(xs && ws);
        if (xs && ws) {
            /* ko's body: barrier, fill XS, fill WS, barrier, the products */
            const char *b1 = strstr(xs, "__syncthreads();");
            const char *fx = strstr(xs, "XS[k");
            const char *b2 = b1 ? strstr(b1 + 1, "__syncthreads();") : NULL;
            const char *use = strstr(ws, "* WS[");
            CHECK(b1 && fx && b1 < fx && b2 && b2 > ws && use && b2 < use);
            CHECK(!strstr(use, "__syncthreads();"));
        }
    } else {
        CHECK(!"batch_matmul: cg_cuda_kernel failed");
        fprintf(stderr, "    %s\n", rv_last_error());
    }
    base_free(src);
    base_free(sym);
    base_free(ks);
    rv_module_free(m);
}

/* A thread loop over a ragged row (its extent len[b] depends on the
 * block) launches as many threads as the longest row can have, the ufun's
 * declared bound; the loop's guard idles the rest. */
static void test_ragged_thread_loop(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("r.rv",
                                 "size B in 1..8\nufun len[b < B] in 1..64\n"
                                 "input A : f32[b < B, l < len[b]]\n"
                                 "O[b, l < len[b]] = 2 * A[b, l]\n",
                                 &m),
                 RV_OK);
    if (!m)
        return;
    CHECK_EQ_INT(rv_module_schedule(m, "O", "bind(b, \"blockIdx.x\")\nbind(l, \"threadIdx.x\")"),
                 RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_flat(m, &ks, &n), RV_OK);
    char *src = NULL;
    CgLaunch l;
    CHECK(n >= 1 && cg_cuda_kernel(ks[n - 1], &src, NULL, &l) == RV_OK);
    if (src) {
        CHECK_STR_CONTAINS(src, "Launch: grid (B, 1, 1), block (64, 1, 1)");
        CHECK_STR_CONTAINS(src, "if (l < ");
    }
    base_free(src);
    base_free(ks);
    rv_module_free(m);
}

/* The number of times `what` occurs in s. */
static int occurrences(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* A copy whose own loops are bound to threads, computed inside its
 * reader's thread loops, is filled by the threads together: its region is
 * the union over the thread loops (4 rows here, not the thread's 1), in
 * shared memory, with a barrier before the reads. */
static void test_cooperative_copy(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("c.rv",
                                 "size T in 1..8\ninput X : f32[16 * T, 64]\n"
                                 "Y[i, j] = X[i, j] * 2\n",
                                 &m),
                 RV_OK);
    if (!m)
        return;
    CHECK_EQ_INT(rv_module_schedule(m, "Y",
                                    "io, ii = split(i, 4)\nbind(io, \"blockIdx.x\")\n"
                                    "bind(ii, \"threadIdx.y\")\nbind(j, \"threadIdx.x\")\n"
                                    "XL = cache_read(X)\ncompute_at(XL, ii)"),
                 RV_OK);
    CHECK_EQ_INT(rv_module_schedule(m, "XL", "bind(j, \"threadIdx.x\")"), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_pipeline(m, &ks, &n), RV_OK);
    char *src = NULL;
    CHECK(n == 1 && cg_cuda_kernel(ks[0], &src, NULL, NULL) == RV_OK);
    if (src) {
        CHECK_STR_CONTAINS(src, "__shared__ float XL[256];");
        /* one barrier, between the fill and the products */
        CHECK_EQ_INT(occurrences(src, "__syncthreads();"), 1);
        const char *sync = strstr(src, "__syncthreads();");
        CHECK(sync && strstr(src, "XL[") < sync && strstr(sync, "XL["));
    }
    base_free(src);
    base_free(ks);
    rv_module_free(m);
}


/* TreeLSTM's group (examples/tree_lstm.rv) under either gpu_batches: a
 * barrier wherever a member reads the one before it at its own node
 * (hs -> iou -> c -> h) and after each batch. "launch": 7 entry points, the
 * leaves' iou, c and h once, the internal nodes' hs, iou, c and h once per
 * batch, each grid sized by its batch's length; "persistent": one kernel,
 * the same barriers as rv_grid_sync() (3 in the leaves and before the
 * batches, 4 per batch), bound loops striding over the grid. */
static void test_recursion_units(void) {
    for (int x = 0; x < RV_COUNT(examples); x++) {
        const Example *ex = &examples[x];
        if (strcmp(ex->file, "tree_lstm.rv") != 0)
            continue;
        bool persistent = strstr(ex->s[2].steps, "persistent") != NULL;
        rv_module *m = load_example(ex, false);
        Kernel **ks = NULL;
        int n = 0;
        if (!m || lower_flat(m, &ks, &n) != RV_OK) {
            CHECK(!"tree_lstm: lowering failed");
            rv_module_free(m);
            continue;
        }
        const Kernel *R = NULL;
        for (int k = 0; k < n; k++)
            if (strcmp(ks[k]->name, "R") == 0)
                R = ks[k];
        char *src = NULL, *sym = NULL;
        CgLaunch l;
        CHECK(R != NULL);
        if (R && cg_cuda_kernel(R, &src, &sym, &l) == RV_OK) {
            if (persistent) {
                CHECK(l.persistent);
                CHECK_EQ_INT(l.nfns, 0);
                CHECK_EQ_INT(occurrences(src, "rv_grid_sync();"), 7);
                CHECK_STR_CONTAINS(src, "n += gridDim.x)");
                CHECK_STR_CONTAINS(src, "for (int64_t b = 0; b < v_T_nbatch - 1; b++) {");
            } else {
                CHECK(!l.persistent);
                CHECK_EQ_INT(l.nfns, 7);
                for (int i = 0; i < l.nfns && l.nfns == 7; i++) {
                    CHECK((l.fns[i].batch != NULL) == (i >= 3));
                    char *g = ir_expr_str(l.fns[i].grid[0]);
                    CHECK_STR_CONTAINS(g, i >= 3 ? "_T_batch_length[b + 1]" : "_T_batch_length[0]");
                    base_free(g);
                }
                CHECK(!strstr(src, "rv_grid_sync"));
                CHECK_STR_CONTAINS(src, "kernel_R_6(");
                CHECK_STR_CONTAINS(src, "const int64_t b) {");
            }
            cg_cuda_launch_free(&l);
        } else {
            CHECK(!"tree_lstm: cg_cuda_kernel failed");
        }
        base_free(src);
        base_free(sym);
        base_free(ks);
        rv_module_free(m);
    }
}

/* The first kernel of module text `text` (plus schedule `steps` of `target`,
 * if any) must be refused with a message containing `why`. */
static void check_refused(const char *text, const char *target, const char *steps,
                          const char *why) {
    rv_module *m = NULL;
    rv_status st = rv_module_parse("refused.rv", text, &m);
    CHECK_EQ_INT(st, RV_OK);
    if (st == RV_OK && target)
        CHECK_EQ_INT(st = rv_module_schedule(m, target, steps), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    if (st == RV_OK)
        CHECK_EQ_INT(st = lower_flat(m, &ks, &n), RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s\n", rv_last_error());
    } else {
        char *src = NULL, *sym = NULL;
        CHECK_EQ_INT(cg_cuda_kernel(ks[n - 1], &src, &sym, NULL), RV_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(rv_last_error(), why);
        CHECK(src == NULL);
        base_free(src);
        base_free(sym);
    }
    base_free(ks);
    rv_module_free(m);
}

/* What the CUDA back end cannot express yet. */
static void test_unsupported(void) {
    /* dense_gelu's CPU schedule: the rows of X it copies (cache_read, 32 x
     * 768 floats) would need a device allocation */
    char *text = NULL;
    size_t len;
    CHECK_EQ_INT(base_read_file("examples/dense_gelu.rv", &text, &len), RV_OK);
    if (text)
        check_refused(text, NULL, NULL, "needs a device allocation");
    base_free(text);

    /* extern calls */
    check_refused("size M in 1..64\ninput A : f32[M, 32]\ninput B : f32[16, 32]\n"
                  "P : f32[M, 16] = extern \"matmul_nt\"(A, B)\n",
                  NULL, NULL, "extern matmul_nt has no CUDA implementation");


    /* a block-shared tile that the threads of a loop shorter than the
     * block (8 of 16 threads) both update and read: the barrier it would
     * need is one the other threads never reach */
    check_refused("size T in 1..8\ninput X : f32[16 * T, 64]\ninput W : f32[64, 64]\n"
                  "Y[i, j] = sum(k < 64) X[i, k] * W[j, k]\n"
                  "schedule Y {\n    YL = cache_write(Y, \"local\")\n"
                  "    io, jo, ii, ji = tile(i, j, 8, 16)\n    bind(io, \"blockIdx.x\")\n"
                  "    bind(ji, \"threadIdx.x\")\n    compute_at(YL, io)\n}\n",
                  "YL", "reorder(k, i, j)\nbind(i, \"threadIdx.x\")",
                  "loop i both writes and reads the block-shared buffer YL");
}

/* ---- the runtime's CUDA target ---- */

/* Driver failures are messages naming the call and its CUresult: the
 * toolkit's stub libcuda.so has every entry point, and cuInit fails. */
static void test_driver_errors(void) {
    CHECK_EQ_INT(jit_cuda_probe("libravel_no_such_driver.so"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "no CUDA driver (libravel_no_such_driver.so not found)");
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (access(stub, R_OK) != 0) {
        printf("skipped the stub driver: %s is absent\n", stub);
        return;
    }
    CHECK_EQ_INT(jit_cuda_probe(stub), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "cuInit failed: ");
    CHECK_STR_CONTAINS(rv_last_error(), "(CUresult 34)"); /* CUDA_ERROR_STUB_LIBRARY */
    /* the rv_compile_options target is checked */
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("t.rv", "size N in 1..4\ninput X : f32[N]\nY[i] = X[i]\n", &m),
                 RV_OK);
    rv_compile_options o = {.target = (rv_target)7};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &o, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "unknown target 7");
    rv_module_free(m);
}

/* The directory of this test binary ($BUILD/tests), for $BUILD/ravel. */
static bool ravel_path(char *out, size_t n) {
    char self[PATH_MAX - 16];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0)
        return false;
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return false;
    *slash = '\0';
    snprintf(out, n, "%s/../ravel", self);
    return access(out, X_OK) == 0;
}

/* Without a driver the CUDA target is refused at compile time, with the
 * reason; with one, `ravel run --target cuda --check` on every example
 * with its GPU schedule. */
static void test_cuda_target(void) {
    rv_module *m = load_example(&examples[0], false);
    if (!m)
        return;
    rv_compile_options o = {.target = RV_TARGET_CUDA};
    rv_program *p = NULL;
    rv_status st = rv_program_compile(m, &o, &p);
    if (jit_cuda_device_count() == 0) {
        CHECK_EQ_INT(st, RV_ERR_UNSUPPORTED);
        void *h = getenv("RAVEL_CUDA_DRIVER") ? NULL : dlopen("libcuda.so.1", RTLD_LAZY);
        if (h)
            dlclose(h); /* a driver without a device: its own reason */
        else
            CHECK_STR_CONTAINS(rv_last_error(), "no CUDA driver (libcuda.so.1 not found)");
        CHECK(p == NULL);
        /* and the same from the command line */
        char ravel[PATH_MAX];
        CHECK(ravel_path(ravel, sizeof ravel));
        char *argv[] = {ravel, "run", "examples/trmm.rv", "--target", "cuda", "--random",
                        "1",   NULL};
        char *out = NULL;
        int code = -1;
        CHECK_EQ_INT(jit_run(argv, &out, &code), RV_OK);
        CHECK_EQ_INT(code, 1);
        CHECK_STR_CONTAINS(out, "error: ");
        CHECK_STR_CONTAINS(out, "CUDA");
        base_free(out);
        argv[4] = "tpu";
        CHECK_EQ_INT(jit_run(argv, &out, &code), RV_OK);
        CHECK_EQ_INT(code, 2);
        CHECK_STR_CONTAINS(out, "unknown target 'tpu' (cpu or cuda)");
        base_free(out);
        rv_program_free(p);
        rv_module_free(m);
        printf("skipped: no CUDA device (%s)\n", rv_last_error());
        return;
    }
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    rv_program_free(p);
    rv_module_free(m);

    char ravel[PATH_MAX], dir[] = "/tmp/ravel_test_cuda_XXXXXX";
    CHECK(ravel_path(ravel, sizeof ravel));
    CHECK(mkdtemp(dir) != NULL);
    for (int x = 0; x < RV_COUNT(examples); x++) {
        const Example *ex = &examples[x];
        char path[PATH_MAX + 64], *text = NULL, *src;
        size_t len;
        snprintf(path, sizeof path, "examples/%s", ex->file);
        if (base_read_file(path, &text, &len) != RV_OK) {
            CHECK(!"example unreadable");
            continue;
        }
        src = strip_schedules(text);
        Buf b = {0};
        buf_puts(&b, src);
        for (int i = 0; i < RV_COUNT(ex->s) && ex->s[i].tensor; i++)
            buf_printf(&b, "\nschedule %s {\n%s\n}\n", ex->s[i].tensor, ex->s[i].steps);
        snprintf(path, sizeof path, "%s/%s", dir, ex->file);
        CHECK_EQ_INT(base_write_file(path, buf_str(&b), b.len), RV_OK);
        /* a recursion (group R) on every shape of random structures */
        bool rec = false;
        for (int i = 0; i < RV_COUNT(ex->s) && ex->s[i].tensor; i++)
            rec |= strcmp(ex->s[i].tensor, "R") == 0;
        for (int seed = 1; seed <= (rec ? 6 : 2); seed++) {
            char sd[16];
            snprintf(sd, sizeof sd, "%d", seed);
            char *argv[] = {ravel,      "run", path,      "--target", "cuda",
                            "--random", sd,    "--check", NULL};
            char *out = NULL;
            int code = -1;
            CHECK_EQ_INT(jit_run(argv, &out, &code), RV_OK);
            CHECK_EQ_INT(code, 0);
            printf("ravel run --target cuda --check %s --random %d: %s\n", ex->file, seed,
                   code == 0 ? "ok" : "FAILED");
            if (code != 0)
                fprintf(stderr, "%s\n", out ? out : "");
            base_free(out);
        }
        unlink(path);
        buf_free(&b);
        base_free(src);
        base_free(text);
    }
    rmdir(dir);
}

int main(void) {
    /* the examples are found from the repository root, where make test runs */
    RUN(test_examples_to_ptx);
    RUN(test_gpu_split_keeps_guard);
    RUN(test_shared_tiles);
    RUN(test_ragged_thread_loop);
    RUN(test_cooperative_copy);
    RUN(test_recursion_units);
    RUN(test_unsupported);
    RUN(test_driver_errors);
    RUN(test_cuda_target);
    return harness_report();
}
