/*
 * query.c — the applied schedule as data (rv_module_schedule_info, in
 * api.c; include/ravel.h): a snapshot of the stages, their placement, their loops
 * in order with kind, extent and origin, and their notes.
 *
 * The snapshot owns everything it points to (one arena), so it outlives
 * the IR scope the schedule is built in: the module is as it was, however
 * often a tuner or a fuzzer asks. Extents are the schedule's own (a split
 * gives ceil(E/F) and F, a fuse the product), printed as .rv expressions;
 * the lowering's per-tile extents (a partitioned tail) are not the
 * schedule's and are not shown.
 */
#include <string.h>

#include "sched/sched.h"

struct rv_schedule_info {
    Arena *arena;
    int nstages;
    rv_stage_info *stages;
};

/* The public enums mirror the schedule's own. */
_Static_assert((int)RV_LOOP_SERIAL == LOOP_SERIAL && (int)RV_LOOP_PARALLEL == LOOP_PARALLEL &&
                   (int)RV_LOOP_VECTOR == LOOP_VECTOR && (int)RV_LOOP_UNROLL == LOOP_UNROLL &&
                   (int)RV_LOOP_GPU_BLOCK_X == LOOP_GPU_BLOCK_X &&
                   (int)RV_LOOP_GPU_THREAD_Z == LOOP_GPU_THREAD_Z &&
                   (int)RV_LOOP_KIND_COUNT == LOOP_COUNT,
               "rv_loop_kind follows LoopKind");
_Static_assert((int)RV_LOOP_AXIS == IV_ROOT && (int)RV_LOOP_OUTER == IV_OUTER &&
                   (int)RV_LOOP_INNER == IV_INNER && (int)RV_LOOP_FUSED == IV_FUSED &&
                   (int)RV_LOOP_ORIGIN_COUNT == IV_COUNT,
               "rv_loop_origin follows IterRel");
_Static_assert((int)RV_STAGE_TENSOR == STAGE_OP && (int)RV_STAGE_CACHE_READ == STAGE_CACHE_READ &&
                   (int)RV_STAGE_CACHE_WRITE == STAGE_CACHE_WRITE &&
                   (int)RV_STAGE_PART == STAGE_PART && (int)RV_STAGE_KIND_COUNT == STAGE_COUNT,
               "rv_stage_kind follows StageKind");
_Static_assert((int)RV_ATTACH_ROOT == ATTACH_ROOT && (int)RV_ATTACH_AT == ATTACH_AT &&
                   (int)RV_ATTACH_INLINE == ATTACH_INLINE && (int)RV_ATTACH_COUNT == ATTACH_COUNT,
               "rv_stage_attach follows AttachKind");
_Static_assert((int)RV_NOTE_DYNAMIC_BATCH == NOTE_DYNAMIC_BATCH &&
                   (int)RV_NOTE_SPECIALIZE == NOTE_SPECIALIZE && (int)RV_NOTE_BATCH == NOTE_BATCH &&
                   (int)RV_NOTE_REFACTOR == NOTE_REFACTOR &&
                   (int)RV_NOTE_GPU_BATCHES == NOTE_GPU_BATCHES &&
                   (int)RV_NOTE_UNROLL == NOTE_UNROLL &&
                   (int)RV_NOTE_KIND_COUNT == NOTE_COUNT,
               "rv_stage_note_kind follows StageNoteKind");

static Expr *ceil_div(Module *m, Expr *e, int64_t f) {
    if (f == 1)
        return e;
    return ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, f - 1)), ir_int(m, f));
}

/* The trip count of v over the stage's whole tensor; NULL where an axis
 * has no extent. */
static Expr *iv_extent(Module *m, const IterVar *v) {
    switch (v->rel) {
    case IV_ROOT:
        if (!v->axis->extent)
            return NULL;
        if (v->part != PART_WHOLE) { /* split_op: E/M*M full tiles, the rest */
            Expr *e = v->axis->extent, *f = ir_int(m, v->part_mult);
            Expr *full = ir_binary(m, EX_MUL, ir_binary(m, EX_DIV, e, f), f);
            return v->part == PART_FULL ? full : ir_binary(m, EX_SUB, e, full);
        }
        return v->pad > 1
                   ? ir_binary(m, EX_MUL, ceil_div(m, v->axis->extent, v->pad), ir_int(m, v->pad))
                   : v->axis->extent;
    case IV_OUTER:
        return ceil_div(m, iv_extent(m, v->parent), v->factor);
    case IV_INNER:
        return ir_int(m, v->factor);
    case IV_FUSED:
        if (v->variable) /* the sum of the inner extents (vfuse.c) */
            return sched_vfuse_extent(m, v);
        return ir_binary(m, EX_MUL, iv_extent(m, v->fa), iv_extent(m, v->fb));
    default:
        RV_UNREACHABLE();
    }
}

static const char *name_or_null(Arena *a, const char *s) {
    return s ? arena_strdup(a, s) : NULL;
}

static void fill_loop(Arena *a, Module *m, const IterVar *v, rv_loop_info *l) {
    l->name = arena_strdup(a, v->name);
    l->kind = (rv_loop_kind)v->kind;
    l->kind_name = sched_loop_kind_name(v->kind); /* static */
    Expr *e = iv_extent(m, v);
    if (e) {
        char *s = ir_expr_str(e);
        l->extent = arena_strdup(a, s);
        base_free(s);
    } else {
        l->extent = "?";
    }
    l->reduce = v->reduce;
    l->origin = (rv_loop_origin)v->rel;
    l->pad = v->rel == IV_ROOT ? v->pad : 1;
    if (v->rel == IV_OUTER || v->rel == IV_INNER) {
        l->parent = arena_strdup(a, v->parent->name);
        l->factor = v->factor;
    } else if (v->rel == IV_FUSED) {
        l->fused_outer = arena_strdup(a, v->fa->name);
        l->fused_inner = arena_strdup(a, v->fb->name);
    }
}

rv_schedule_info *sched_query(const Schedule *s) {
    Arena *a = arena_new();
    rv_schedule_info *q = arena_alloc(a, sizeof *q);
    q->arena = a;
    q->nstages = s->stages.len;
    q->stages = arena_alloc(a, sizeof(rv_stage_info) * (size_t)(s->stages.len + 1));
    for (int i = 0; i < s->stages.len; i++) {
        const Stage *st = s->stages.data[i];
        rv_stage_info *o = &q->stages[i];
        o->name = arena_strdup(a, st->name);
        o->kind = (rv_stage_kind)st->kind;
        o->attach = (rv_stage_attach)st->attach;
        if (st->attach == ATTACH_AT) {
            o->at_stage = arena_strdup(a, st->at->name);
            o->at_loop = name_or_null(a, st->at_iv ? st->at_iv->name : NULL);
        }
        o->source = st->kind == STAGE_CACHE_READ ? arena_strdup(a, st->source->name)
                    : st->kind == STAGE_PART     ? arena_strdup(a, st->whole->name)
                                                 : NULL;
        o->padded = st->local_pad;
        /* an inlined stage keeps its IterVars but has no loops, nor has
         * a split one (its parts have) */
        o->nloops = st->attach == ATTACH_INLINE || st->parts[0] ? 0 : st->leaves.len;
        rv_loop_info *loops = arena_alloc(a, sizeof(rv_loop_info) * (size_t)(o->nloops + 1));
        for (int k = 0; k < o->nloops; k++)
            fill_loop(a, s->m, st->leaves.data[k], &loops[k]);
        o->loops = loops;
        o->nnotes = st->nnotes;
        o->notes = arena_memdup(a, st->notes, sizeof(rv_stage_note) * (size_t)(st->nnotes + 1));
    }
    return q;
}

int rv_schedule_info_num_stages(const rv_schedule_info *s) {
    return s ? s->nstages : 0;
}

const rv_stage_info *rv_schedule_info_stage(const rv_schedule_info *s, int i) {
    return s && i >= 0 && i < s->nstages ? &s->stages[i] : NULL;
}

const rv_stage_info *rv_schedule_info_find(const rv_schedule_info *s, const char *name) {
    for (int i = 0; s && name && i < s->nstages; i++)
        if (strcmp(s->stages[i].name, name) == 0)
            return &s->stages[i];
    return NULL;
}

void rv_schedule_info_free(rv_schedule_info *s) {
    if (s)
        arena_free(s->arena);
}
