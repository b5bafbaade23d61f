/*
 * bench/encoder/ravel_encoder.c — ravel's side of the encoder benchmark
 * (ravel_encoder.h): compile once, bind the weights once (every batch's
 * bindings inherit that one binding: the packs the program keeps of its
 * params are made once, not per batch), bind the batch's lengths as the UF
 * len and its packed tokens as the ragged X, run into the caller's Y.
 */
#define _POSIX_C_SOURCE 200809L
#include "ravel_encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"

const char *const re_weight_names[RE_NWEIGHTS] = {"w_qkv", "b_qkv", "w_o",   "b_o",
                                                  "ln1_g", "ln1_b", "w_ff1", "b_ff1",
                                                  "w_ff2", "b_ff2", "ln2_g", "ln2_b"};

struct ReProgram {
    rv_module *m;
    rv_program *p;
    int hidden;
    float *wdata[RE_NWEIGHTS]; /* aligned copies, owned */
    rv_array *w[RE_NWEIGHTS];  /* wrapping them */
    rv_bindings *weights;      /* bound to them, once */
};

struct ReBatch {
    ReProgram *p;
    rv_bindings *b;
    int64_t *len; /* the UF's values (i64, as UFs are) */
    rv_array *lens, *x, *y;
};

static void re_fail(void) {
    fprintf(stderr, "ravel_encoder: %s\n", rv_last_error());
    exit(1);
}

ReProgram *re_program_new(const char *path, int threads, int hidden, int ff,
                          const float *const *weights) {
    ReProgram *p = calloc(1, sizeof *p);
    p->hidden = hidden;
    const int64_t h = hidden, f = ff;
    /* the shapes of ENCODER.md's parameters, [out, in] */
    const int64_t shapes[RE_NWEIGHTS][2] = {{3 * h, h}, {3 * h, 0}, {h, h}, {h, 0},
                                            {h, 0},     {h, 0},     {f, h}, {f, 0},
                                            {h, f},     {h, 0},     {h, 0}, {h, 0}};
    rv_compile_options opt = {.serial = threads == 1, .threads = threads};
    if (rv_module_load(path, &p->m) != RV_OK || rv_program_compile(p->m, &opt, &p->p) != RV_OK)
        re_fail();
    for (int i = 0; i < RE_NWEIGHTS; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        size_t n = (size_t)shapes[i][0] * (size_t)(nd == 2 ? shapes[i][1] : 1);
        if (posix_memalign((void **)&p->wdata[i], 64, n * sizeof(float)))
            exit(1);
        memcpy(p->wdata[i], weights[i], n * sizeof(float));
        if (rv_array_wrap(RV_F32, nd, shapes[i], p->wdata[i], &p->w[i]) != RV_OK)
            re_fail();
    }
    p->weights = rv_bindings_new(p->m);
    for (int i = 0; i < RE_NWEIGHTS; i++)
        if (!p->weights || rv_bindings_set_array(p->weights, re_weight_names[i], p->w[i]) != RV_OK)
            re_fail();
    return p;
}

void re_program_free(ReProgram *p) {
    rv_bindings_free(p->weights);
    for (int i = 0; i < RE_NWEIGHTS; i++) {
        rv_array_free(p->w[i]);
        free(p->wdata[i]);
    }
    rv_program_free(p->p);
    rv_module_free(p->m);
    free(p);
}

ReBatch *re_batch_new(ReProgram *p, const int *len, int batch, const float *x, float *y) {
    ReBatch *rb = calloc(1, sizeof *rb);
    rb->p = p;
    if (posix_memalign((void **)&rb->len, 64, ((size_t)batch + 1) * sizeof *rb->len))
        exit(1);
    int64_t tokens = 0;
    for (int b = 0; b < batch; b++)
        tokens += rb->len[b] = len[b];
    int64_t nb = batch, nx = tokens * p->hidden;
    rb->b = rv_bindings_new(p->m);
    if (rv_array_wrap(RV_I64, 1, &nb, rb->len, &rb->lens) != RV_OK ||
        rv_array_wrap(RV_F32, 1, &nx, (void *)x, &rb->x) != RV_OK ||
        rv_array_wrap(RV_F32, 1, &nx, y, &rb->y) != RV_OK)
        re_fail();
    rv_status st = rv_bindings_inherit(rb->b, p->weights);
    st = st != RV_OK ? st : rv_bindings_set_size(rb->b, "B", batch);
    st = st != RV_OK ? st : rv_bindings_set_array(rb->b, "len", rb->lens);
    st = st != RV_OK ? st : rv_bindings_set_array(rb->b, "X", rb->x);
    if (st != RV_OK)
        re_fail();
    return rb;
}

void re_batch_free(ReBatch *rb) {
    rv_bindings_free(rb->b);
    rv_array_free(rb->lens);
    rv_array_free(rb->x);
    rv_array_free(rb->y);
    free(rb->len);
    free(rb);
}

void re_run(void *ctx) {
    ReBatch *rb = ctx;
    if (rv_program_run_into(rb->p->p, rb->b, &rb->y, 1) != RV_OK)
        re_fail();
}

ReCounters re_program_counters(const ReProgram *p) {
    rv_program_counters c;
    rv_program_stats(p->p, &c);
    return (ReCounters){c.runs,           c.prelude_runs,     c.aux_bytes,
                        c.compile_seconds, c.prelude_seconds, c.kernel_seconds};
}
