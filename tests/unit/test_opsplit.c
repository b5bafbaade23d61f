/*
 * test_opsplit.c — operation splitting and horizontal fusion
 * (src/sched/opsplit.c, src/lower/opsplit.c): the parts as the query
 * reports them, and the loop IR of a split stage, with and without
 * hfuse: the full part's tiles have no check, the rest starts at the
 * split point, the fused loop runs over both parts.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "jit/jit.h"
#include "lower/lower.h"

static const char *const rows = "size B in 0..8\n"
                                "ufun len[b < B] in 0..40\n"
                                "input X : f32[b < B, l < len[b]]\n"
                                "Y[b, l < len[b]] = X[b, l] * 2.0 + 1.0\n"
                                "schedule Y {\n"
                                "    F, R = split_op(l, 8)\n"
                                "}\n"
                                "schedule F {\n"
                                "    lo, li = split(l, 8)\n"
                                "    vectorize(li)\n"
                                "    parallel(b)\n"
                                "}\n"
                                "schedule R {\n"
                                "    parallel(b)\n"
                                "}\n";

/* The loop IR of text's one kernel after the passes, into b. */
static bool lowered(const char *text, Buf *b) {
    rv_module *m = parse_ok(text);
    if (!m)
        return false;
    Kernel **ks;
    int n;
    rv_status st = lower_pipeline(m, &ks, &n);
    CHECK_EQ_INT(st, RV_OK);
    if (st == RV_OK) {
        CHECK_EQ_INT(n, 1);
        for (int k = 0; k < n; k++)
            lower_print_kernel(b, ks[k]);
        base_free(ks);
    } else {
        fprintf(stderr, "%s\n", rv_last_error());
    }
    rv_module_free(m);
    return st == RV_OK;
}

static void check_has(const char *text, const char *want) {
    bool ok = strstr(text, want) != NULL;
    CHECK(ok && "the loop IR has it");
    if (!ok)
        fprintf(stderr, "    no \"%s\" in\n%s\n", want, text);
}

/* The parts are stages of kind PART whose split loop runs over their
 * range; the split stage has no loops of its own. */
static void test_query_parts(void) {
    rv_module *m = parse_ok(rows);
    if (!m)
        return;
    rv_schedule_info *q = rv_module_schedule_info(m);
    CHECK(q != NULL);
    const rv_stage_info *y = q ? rv_schedule_info_find(q, "Y") : NULL,
                        *f = q ? rv_schedule_info_find(q, "F") : NULL,
                        *r = q ? rv_schedule_info_find(q, "R") : NULL;
    CHECK(y && f && r);
    if (y && f && r) {
        CHECK(y->kind == RV_STAGE_TENSOR && y->nloops == 0);
        CHECK(f->kind == RV_STAGE_PART && r->kind == RV_STAGE_PART);
        CHECK(f->source && strcmp(f->source, "Y") == 0);
        CHECK_EQ_INT(f->nloops, 3); /* b, lo, li */
        CHECK_EQ_INT(r->nloops, 2); /* b, l */
        if (f->nloops == 3 && r->nloops == 2) {
            CHECK(strcmp(f->loops[1].extent, "(len[b] / 8 * 8 + 7) / 8") == 0);
            CHECK(strcmp(r->loops[1].extent, "len[b] - len[b] / 8 * 8") == 0);
            if (strcmp(r->loops[1].extent, "len[b] - len[b] / 8 * 8") != 0)
                fprintf(stderr, "    %s | %s\n", f->loops[1].extent, r->loops[1].extent);
        }
    }
    rv_schedule_info_free(q);
    rv_module_free(m);
}

/* Without hfuse: two parallel loops, the full tiles' vector loop with no
 * check (len[b]/8*8 divides by 8), the rest from len[b]/8*8 on. */
static void test_lower_parts(void) {
    Buf b = {0};
    if (lowered(rows, &b)) {
        const char *t = buf_str(&b);
        check_has(t, "let t0 = i64(len[b])/8\n    for lo in 0..t0:\n");
        check_has(t, "vector for li in 0..8:\n        Y[li + ");
        CHECK(strstr(t, "if ") == NULL && "no check in either part");
        check_has(t, "let t2 = i64(len[b])/8*8\n    let t3 = i64(len[b]) - t2\n"
                     "    for l in 0..t3:\n      Y[l + Y_start1_b0 + t2] =");
    }
    buf_free(&b);
}

/* hfuse: one parallel loop over B + B rows; each arm binds its part's
 * loop variable. */
static void test_lower_hfuse(void) {
    Buf text = {0};
    buf_puts(&text, rows);
    buf_puts(&text, "schedule F {\n    hfuse(R)\n}\n");
    Buf b = {0};
    if (lowered(buf_str(&text), &b)) {
        const char *t = buf_str(&b);
        check_has(t, "parallel for h in 0..B*2:\n    if h < B:\n      let b = h\n");
        check_has(t, "    else:\n      let b = h - B\n");
    }
    buf_free(&b);
    buf_free(&text);
}

/* CUDA: parts bound to blockIdx.x, hfused, are one grid of B*2 blocks
 * (each block the rows of one part of one sequence); NVRTC compiles it
 * where it is installed. */
static void test_cuda_one_grid(void) {
    static const char *const text = "size B in 0..12\n"
                                    "ufun len[b < B] in 0..70\n"
                                    "input X : f32[b < B, l < len[b]]\n"
                                    "Y[b, l < len[b]] = X[b, l] * 2.0 + 1.0\n"
                                    "schedule Y {\n"
                                    "    F, R = split_op(l, 32)\n"
                                    "}\n"
                                    "schedule F {\n"
                                    "    lo, li = split(l, 32)\n"
                                    "    bind(b, \"blockIdx.x\")\n"
                                    "    bind(li, \"threadIdx.x\")\n"
                                    "    hfuse(R)\n"
                                    "}\n"
                                    "schedule R {\n"
                                    "    bind(b, \"blockIdx.x\")\n"
                                    "    lo, li = split(l, 32, tail=\"guard\")\n"
                                    "    bind(li, \"threadIdx.x\")\n"
                                    "}\n";
    rv_module *m = parse_ok(text);
    if (!m)
        return;
    Kernel **ks = NULL;
    int n = 0;
    static const char *const needed[] = {"reduce", "checks", "flatten"};
    rv_status st = lower_module(m, &ks, &n);
    for (int k = 0; st == RV_OK && k < n; k++)
        for (int i = 0; st == RV_OK && i < (int)RV_COUNT(needed); i++)
            st = lower_run_pass(ks[k], needed[i]);
    CHECK_EQ_INT(st, RV_OK);
    CHECK_EQ_INT(n, 1);
    if (st == RV_OK && n == 1) {
        char *src = NULL, *sym = NULL, *ptx = NULL;
        CgLaunch l;
        st = cg_cuda_kernel(ks[0], &src, &sym, &l);
        CHECK_EQ_INT(st, RV_OK);
        if (st == RV_OK) {
            if (getenv("RAVEL_TEST_SHOW"))
                printf("%s\n", src);
            char *grid = ir_expr_str(l.grid[0]);
            CHECK(strcmp(grid, "B * 2") == 0 && "one grid over both parts");
            if (strcmp(grid, "B * 2") != 0)
                fprintf(stderr, "    grid.x = %s\n", grid);
            base_free(grid);
            CHECK(l.grid[1] == NULL && l.block[0] != NULL);
            if (jit_nvrtc_available()) {
                CHECK_EQ_INT(jit_nvrtc_compile(src, NULL, &ptx), RV_OK);
                base_free(ptx);
            }
        }
        base_free(src);
        base_free(sym);
    }
    base_free(ks);
    rv_module_free(m);
}

int main(void) {
    RUN(test_query_parts);
    RUN(test_lower_parts);
    RUN(test_lower_hfuse);
    RUN(test_cuda_one_grid);
    return harness_report();
}
