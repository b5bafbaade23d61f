/*
 * c_aot.c — ahead-of-time output: the translation unit of cg_c_module
 * wrapped into a standalone C library with a header (`ravel build`).
 *
 * The JIT path (src/runtime/program.c) interprets the program's host
 * plan (src/plan/plan.h: check the arguments, place UF arrays, allocate
 * AUX arrays and run the preludes, place the tensors, call the kernels,
 * return the results) inside ravel's runtime. An AOT build cannot: its
 * output needs only ravel_rt.h, libc and libm. So this file prints the
 * same plan, step by step, as C next to the kernels:
 *
 *   NAME_run(args, ctx)    the plan's steps in order (emit_step): checks
 *                          sizes and UF values against their declared
 *                          ranges, takes one buffer per plan slot (UF
 *                          array, AUX array, tensor), allocates the AUX
 *                          arrays and runs every prelude, evaluates each
 *                          tensor buffer's size, places the tensors (an
 *                          unpadded user array is used in place when
 *                          64-byte aligned, otherwise copied; a padded one
 *                          is packed into zeroed storage and unpacked
 *                          after), calls the kernels in order and frees
 *                          what it allocated;
 *   NAME_numel_X(args)     the elements of X's canonical array (ragged
 *                          tensors: packed, no padding) — the array
 *                          `ravel eval` writes and rv_program_run returns;
 *   NAME_default_ctx()     a serial rv_rt_ctx over aligned_alloc;
 *   NAME_check_message(e)  the text of the failed run-time check e that
 *                          _run leaves in ctx->error (ravel_rt.h: RUN-TIME
 *                          CHECKS), numbered through the kernels;
 *   NAME_fields[]          the fields of NAME_args, for generic callers.
 *
 * Buffer sizes are the lowering's expressions (Buffer.size: sizes, UF and
 * AUX loads) printed by cg_expr. Canonical counts and the copies between
 * canonical arrays and padded storage walk the tensor's own layout: its
 * axes' extents are tensor-level expressions, whose UF applications are
 * replaced here by loads from the user's UF array at the offset of the
 * UF's storage order (canonical). A ragged UF domain's offsets read its row
 * starts, which such a host function computes first (NAME_starts_F, the
 * prelude's loop on the host) and frees after; a ragged domain whose
 * extents apply another ragged-domain UF is reported as unsupported. A
 * copy puts each element at the storage offset
 * of the symbolic storage order (ir_storage_offset, src/ir/layout.h), the
 * one the kernels index with, over the row-start arrays the preludes
 * filled.
 *
 * Every generated symbol starts with NAME_; the unit's kernels are renamed
 * from kernel_X to NAME_kernel_X by #define, so several models link into
 * one program. Locals of the generated host code are named by cg_name
 * (sizes, UF and AUX arrays, axes) or start with "rv_", which cg_name
 * never produces.
 */
#include <ctype.h>
#include <string.h>

#include "codegen/codegen.h"
#include "plan/plan.h"

typedef enum FieldKind { FK_SIZE, FK_UFUN, FK_INPUT, FK_OUTPUT, FK_COUNT } FieldKind;

static const char *const field_kind_macro[FK_COUNT] = {"SIZE", "UFUN", "INPUT", "OUTPUT"};

/* One field of NAME_args. */
typedef struct Field {
    FieldKind kind;
    const char *name;  /* the .rv name */
    const char *cname; /* the C member name */
    rv_dtype dtype;    /* SIZE: i64 */
    Size *size;
    Ufun *uf;
    Tensor *t;
    Buffer *ufbuf;      /* UFUN: stands for the user's array in tensor-level extents */
    Storage *ufstorage; /* UFUN: its layout (canonical: a UF is never padded) */
} Field;

/* One slot of the host plan (src/plan/plan.h), same index, with the
 * field that holds its UF, input or output. */
typedef struct AotSlot {
    PlanSlotKind kind;
    Buffer *buf;
    Tensor *t;
    int field; /* index in fields of its UF / input / output, or -1 */
} AotSlot;

typedef struct Aot {
    Module *m;
    Kernel *const *ks;
    int n;
    const CgUnit *u;
    const char *name; /* the prefix */
    CgEmit e;
    Vec(Field) fields;
    int nvariants;            /* ks[variant_first[v]...] are variant v's kernels */
    const int *variant_first;
    const PlanDispatch *dispatch;
    int v;               /* the variant being printed */
    const char *vsym;    /* its suffix of NAME_run_vN, NAME_pack_X_vN, ... */
    Plan plan;           /* its host steps */
    Vec(AotSlot) slots;  /* per plan slot */
    PtrMap field_of; /* Size*, Ufun*, Tensor* -> 1 + field index */
    PtrMap starts;   /* Ufun* whose row starts the current host function holds */
    PtrMap starts_used; /* Field* of the UFs whose NAME_starts_F is called */
    int threads;        /* 1: serial default context; else the embedded pool's size */
    rv_status st;
} Aot;

static Field *field_of(Aot *a, const void *obj) {
    intptr_t i = (intptr_t)ptrmap_get(&a->field_of, obj);
    return i ? &a->fields.data[i - 1] : NULL;
}

static AotSlot *slot_of(Aot *a, const Buffer *b) {
    const PlanSlot *s = plan_slot_for(&a->plan, b);
    return s ? &a->slots.data[plan_slot_index(&a->plan, s)] : NULL;
}

static int slot_index(Aot *a, const AotSlot *s) {
    return (int)(s - a->slots.data);
}

/* ---- fields ---- */

static bool is_c_keyword(const char *s) {
    static const char *const kw[] = {
        "auto",     "break",     "case",     "char",      "const",    "continue",  "default",
        "do",       "double",    "else",     "enum",      "extern",   "float",     "for",
        "goto",     "if",        "inline",   "int",       "long",     "register",  "restrict",
        "return",   "short",     "signed",   "sizeof",    "static",   "struct",    "switch",
        "typedef",  "union",     "unsigned", "void",      "volatile", "while",     "_Bool",
        "_Complex", "_Alignas",  "_Alignof", "_Atomic",   "_Generic", "_Noreturn", "bool",
        "class",    "new",       "delete",   "template",  "this",     "operator",  "private",
        "public",   "protected", "virtual",  "namespace", "true",     "false",     "NULL"};
    for (int i = 0; i < RV_COUNT(kw); i++)
        if (strcmp(s, kw[i]) == 0)
            return true;
    return false;
}

static void add_field(Aot *a, Field f, const void *obj) {
    f.cname = is_c_keyword(f.name) ? arena_printf(a->e.arena, "%s_", f.name) : f.name;
    vec_push(&a->fields, f);
    ptrmap_put(&a->field_of, obj, (void *)(intptr_t)a->fields.len);
}

/* Variant v's plan and its slots, each with the field of its UF, input
 * or output. */
static void take_variant(Aot *a, int v) {
    int first = a->variant_first[v];
    int n = (v + 1 < a->nvariants ? a->variant_first[v + 1] : a->n) - first;
    bool *prelude = base_xcalloc((size_t)n + 1, sizeof *prelude);
    for (int k = 0; k < n; k++)
        prelude[k] = a->u->prelude_syms[first + k] != NULL;
    plan_free(&a->plan);
    plan_build(&a->plan, a->m, a->ks + first, n, prelude, false);
    base_free(prelude);
    a->v = v;
    a->vsym = arena_printf(a->e.arena, "_v%d", v);
    a->slots.len = 0;
    for (int i = 0; i < a->plan.slots.len; i++) {
        const PlanSlot *ps = &a->plan.slots.data[i];
        AotSlot s = {.kind = ps->kind, .buf = ps->buf, .t = ps->t, .field = -1};
        Field *f = s.kind == PLAN_SLOT_AUX || s.kind == PLAN_SLOT_PACK ? NULL
                   : field_of(a, s.kind == PLAN_SLOT_UF ? (const void *)s.buf->uf
                                                        : (const void *)s.t);
        if (f)
            s.field = (int)(f - a->fields.data);
        vec_push(&a->slots, s);
    }
}

/* One field per size, UF, input and output (a UF's dtype: its buffer's
 * in the kernels). */
static void gather(Aot *a) {
    Module *m = a->m;
    for (int i = 0; i < m->sizes.len; i++)
        add_field(a,
                  (Field){.kind = FK_SIZE,
                          .name = m->sizes.data[i]->name,
                          .dtype = RV_I64,
                          .size = m->sizes.data[i]},
                  m->sizes.data[i]);
    for (int i = 0; i < m->ufuns.len; i++) {
        Ufun *f = m->ufuns.data[i];
        rv_dtype t = ir_ufun_dtype(f); /* lowering's rule, when no kernel shows it */
        for (int k = 0; k < a->n; k++)
            for (int j = 0; j < a->ks[k]->nparams; j++)
                if (a->ks[k]->params[j].kind == PARAM_UF && a->ks[k]->params[j].buf->uf == f)
                    t = a->ks[k]->params[j].buf->dtype;
        Field fl = {.kind = FK_UFUN, .name = f->name, .dtype = t, .uf = f};
        fl.ufstorage = arena_alloc(a->e.arena, sizeof(Storage));
        if (ir_storage_init(m, fl.ufstorage, f->name, f->nargs, f->args, NULL, t, BUF_ARG, NULL) !=
            RV_OK) {
            if (a->st == RV_OK)
                a->st = base_error_status();
            return; /* cg_c_aot reports it */
        }
        fl.ufbuf = fl.ufstorage->buf;
        fl.ufbuf->uf = f;
        add_field(a, fl, f);
    }
    for (int i = 0; i < m->tensors.len; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            add_field(a, (Field){.kind = FK_INPUT, .name = t->name, .dtype = t->dtype, .t = t}, t);
    }
    for (int i = 0; i < m->tensors.len; i++) {
        Tensor *t = m->tensors.data[i];
        if (ir_tensor_is_output(m, t))
            add_field(a, (Field){.kind = FK_OUTPUT, .name = t->name, .dtype = t->dtype, .t = t}, t);
    }
}

/* ---- tensor-level expressions as C ---- */

static bool uf_ragged(const Storage *st) {
    for (int k = 0; k < st->ndim; k++)
        if (st->variable[k])
            return true;
    return false;
}

/* e with every UF application replaced by a load from the user's UF array
 * (through the field's stand-in buffer) at its storage offset. NULL with
 * a.st set when a UF has a ragged domain. */
static Expr *lower_ufcalls(Aot *a, Expr *e) {
    if (!e || e->n == 0 || e->kind == EX_REDUCE)
        return e;
    Expr *args[RV_MAX_DIMS > 3 ? RV_MAX_DIMS : 3];
    RV_ASSERT(e->n <= (int)RV_COUNT(args));
    bool same = true;
    for (int i = 0; i < e->n; i++) {
        if (!(args[i] = lower_ufcalls(a, e->args[i])))
            return NULL;
        same = same && args[i] == e->args[i];
    }
    if (e->kind != EX_UFCALL)
        return same ? e : ir_rebuild(a->m, e, args);
    Ufun *f = e->u.uf;
    const Storage *st = field_of(a, f)->ufstorage;
    Expr *idx[RV_MAX_DIMS];
    /* a ragged domain's offsets read its row starts, which a host function
     * computes first (declare_starts) */
    if (uf_ragged(st) && !ptrmap_has(&a->starts, f)) {
        a->st = base_error(RV_ERR_UNSUPPORTED,
                           "ufun %s: a ragged domain inside the domain of another ufun is not "
                           "supported by ravel build yet",
                           f->name);
        return NULL;
    }
    for (int k = 0; k < f->nargs; k++)
        idx[k] = args[k]->dtype == RV_I64 ? args[k] : ir_cast(a->m, RV_I64, args[k]);
    /* its extents may apply other UFs */
    Expr *off = lower_ufcalls(a, ir_storage_offset(a->m, st, idx));
    if (!off)
        return NULL;
    return ir_cast(a->m, e->dtype, ir_load(a->m, st->buf, ir_simplify_expr(a->m, off)));
}

static void put_expr(Aot *a, Buf *b, Expr *x) {
    Expr *l = lower_ufcalls(a, x);
    if (!l) {
        buf_puts(b, "0");
        return;
    }
    cg_expr(&a->e, b, l);
}

/* An expression printed with the IR's printer, for comments. */
static void put_ir(Buf *b, const Expr *x) {
    ir_print_expr(b, x);
}

/* ---- function prologues ---- */

/* Starts a host function: names its sizes and UF arrays from rv_args. */
static void begin_host_fn(Aot *a, Buf *b) {
    cg_emit_begin_kernel(&a->e);
    buf_puts(b, "    (void)rv_args; /* a program of constant sizes reads none */\n");
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        if (f->kind == FK_SIZE)
            buf_printf(b, "    const int64_t %s = rv_args->%s;\n",
                       cg_name(&a->e, f->size, f->size->name), f->cname);
        else if (f->kind == FK_UFUN)
            buf_printf(b, "    const %s *%s = rv_args->%s;\n", cg_ctype(f->dtype),
                       cg_name(&a->e, f->ufbuf, f->uf->name), f->cname);
    }
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        if (f->kind == FK_SIZE)
            buf_printf(b, "    (void)%s;\n", cg_name(&a->e, f->size, f->size->name));
        else if (f->kind == FK_UFUN)
            buf_printf(b, "    (void)%s;\n", cg_name(&a->e, f->ufbuf, f->uf->name));
    }
}

/* ---- canonical counts and padded copies ---- */

/* Whether level k's extent mentions an outer axis. */
static bool level_variable(Axis *const *ax, int k) {
    for (int j = 0; j < k; j++)
        if (ir_uses_axis(ax[k]->extent, ax[j]))
            return true;
    return false;
}

/* n levels of 4 spaces */
static void put_indent(Buf *b, int n) {
    for (int i = 0; i < n; i++)
        buf_puts(b, "    ");
}

static void open_loop(Aot *a, Buf *b, Axis *ax, int indent) {
    const char *v = cg_name(&a->e, ax, ax->name);
    put_indent(b, indent);
    buf_printf(b, "for (int64_t %s = 0; %s < ", v, v);
    put_expr(a, b, ax->extent);
    buf_printf(b, "; %s++) {\n", v);
}

static void close_loop(Buf *b, int indent) {
    put_indent(b, indent);
    buf_puts(b, "}\n");
}

typedef Vec(Field *) FieldVec;

/* Every UF with a ragged domain that x applies, into out (no repeats). */
static void collect_ragged_ufs(Aot *a, const Expr *x, PtrMap *seen, FieldVec *out) {
    if (!x || ptrmap_has(seen, x))
        return;
    ptrmap_put(seen, x, (void *)x);
    if (x->kind == EX_UFCALL) {
        Field *f = field_of(a, x->u.uf);
        if (uf_ragged(f->ufstorage) && !ptrmap_has(seen, f)) {
            ptrmap_put(seen, f, f);
            vec_push(out, f);
        }
    }
    for (int i = 0; i < x->n; i++)
        collect_ragged_ufs(a, x->args[i], seen, out);
}

/* At the top of a host function over axes ax[0..nd): the row starts of
 * every ragged UF domain their extents apply, computed by NAME_starts_F
 * into rv_s_F, and rv_bad set when that failed. Returns how many; the
 * function frees them with free_starts. */
static int declare_starts(Aot *a, Buf *b, int nd, Axis *const *ax, FieldVec *ufs) {
    PtrMap seen = {0};
    for (int k = 0; k < nd; k++)
        collect_ragged_ufs(a, ax[k]->extent, &seen, ufs);
    ptrmap_free(&seen);
    ptrmap_free(&a->starts);
    if (ufs->len == 0)
        return 0;
    buf_puts(b, "    int rv_bad = 0;\n");
    for (int i = 0; i < ufs->len; i++) {
        Field *f = ufs->data[i];
        const Storage *st = f->ufstorage;
        buf_printf(b, "    int64_t *rv_s_%s[%d] = {0};\n", f->name, st->ndim);
        buf_printf(b, "    rv_bad |= %s_starts_%s(rv_args, rv_s_%s);\n", a->name, f->name, f->name);
        for (int k = 0; k < st->ndim; k++)
            if (st->start[k])
                buf_printf(b, "    const int64_t *%s = rv_s_%s[%d];\n",
                           cg_name(&a->e, st->start[k], st->start[k]->name), f->name, k);
        ptrmap_put(&a->starts, f->uf, f);
        ptrmap_put(&a->starts_used, f, f);
    }
    return ufs->len;
}

static void free_starts(Aot *a, Buf *b, FieldVec *ufs) {
    for (int i = 0; i < ufs->len; i++)
        for (int k = 0; k < ufs->data[i]->ufstorage->ndim; k++)
            if (ufs->data[i]->ufstorage->start[k])
                buf_printf(b, "    free(rv_s_%s[%d]);\n", ufs->data[i]->name, k);
    ptrmap_free(&a->starts);
    vec_free(ufs);
}

/* static int NAME_starts_F(const NAME_args *rv_args, int64_t **rv_start):
 * the row starts of a ragged UF domain in canonical order (layout.h), one
 * malloc'd array per variable level, sized by its row-start buffer's size
 * (an expression over sizes) and filled as the prelude fills the kernels'
 * (src/lower/storage.c); nonzero when memory ran out or the UF values
 * leave their declared ranges (the arrays would overflow). */
static void emit_starts(Aot *a, Buf *b, const Field *f) {
    const Storage *st = f->ufstorage;
    buf_printf(b, "static int %s_starts_%s(const %s_args *rv_args, int64_t **rv_start) {\n",
               a->name, f->name, a->name);
    begin_host_fn(a, b);
    for (int k = 0; k < st->ndim; k++) {
        if (!st->variable[k])
            continue;
        buf_puts(b, "    {\n        const int64_t rv_n = ");
        put_expr(a, b, st->start[k]->size);
        buf_printf(b,
                   ";\n        int64_t *rv_s = rv_start[%d] = calloc((size_t)rv_n, "
                   "sizeof(int64_t));\n"
                   "        if (!rv_s)\n            return 1;\n"
                   "        int64_t rv_r = 0;\n",
                   k);
        for (int j = 0; j < k; j++)
            open_loop(a, b, st->axes[j], 2 + j);
        put_indent(b, 2 + k);
        buf_puts(b, "if (rv_r + 1 >= rv_n)\n");
        put_indent(b, 3 + k);
        buf_puts(b, "return 1;\n");
        put_indent(b, 2 + k);
        buf_printf(b, "rv_s[rv_r + 1] = rv_s[rv_r] + %s_nonneg(", a->name);
        put_expr(a, b, st->axes[k]->extent);
        buf_puts(b, ");\n");
        put_indent(b, 2 + k);
        buf_puts(b, "rv_r++;\n");
        for (int j = k - 1; j >= 0; j--)
            close_loop(b, 2 + j);
        buf_puts(b, "    }\n");
    }
    buf_puts(b, "    return 0;\n}\n\n");
}

/* int64_t NAME_numel_X(const NAME_args *rv_args): the elements of a
 * layout over axes ax[0..nd) in canonical order (no padding). Loops run
 * over the levels outside the last variable one. */
static void emit_numel(Aot *a, Buf *b, const char *what, int nd, Axis *const *ax) {
    buf_printf(b, "int64_t %s_numel_%s(const %s_args *rv_args) {\n", a->name, what, a->name);
    begin_host_fn(a, b);
    int last = -1;
    for (int k = 0; k < nd; k++)
        if (level_variable(ax, k))
            last = k;
    int outer = last < 0 ? 0 : last;
    FieldVec ufs = {0};
    bool starts = declare_starts(a, b, nd, ax, &ufs) > 0;
    buf_puts(b, "    int64_t rv_c = 0;\n");
    if (starts)
        buf_puts(b, "    if (rv_bad) {\n        rv_c = -1;\n        goto rv_out;\n    }\n");
    for (int k = 0; k < outer; k++)
        open_loop(a, b, ax[k], 1 + k);
    put_indent(b, 1 + outer);
    buf_puts(b, "rv_c += 1");
    for (int k = outer; k < nd; k++) {
        buf_printf(b, " * %s_nonneg(", a->name);
        put_expr(a, b, ax[k]->extent);
        buf_puts(b, ")");
    }
    buf_puts(b, ";\n");
    for (int k = outer - 1; k >= 0; k--)
        close_loop(b, 1 + k);
    if (starts)
        buf_puts(b, "rv_out:\n");
    free_starts(a, b, &ufs);
    buf_puts(b, "    return rv_c;\n}\n\n");
}

/* Whether a layout over ax[0..nd) is ragged (some extent uses an outer
 * axis): its canonical array is then 1-D, packed. */
static bool layout_ragged(int nd, Axis *const *ax) {
    for (int k = 0; k < nd; k++)
        if (level_variable(ax, k))
            return true;
    return false;
}

/* int NAME_shape_X(const NAME_args *rv_args, int64_t *rv_dims): the
 * canonical array's shape, each extent evaluated from args (a ragged
 * layout: its element count, 1-D); returns the rank, -1 when a count
 * cannot be computed. */
static void emit_shape(Aot *a, Buf *b, const char *what, int nd, Axis *const *ax) {
    buf_printf(b, "static int %s_shape_%s(const %s_args *rv_args, int64_t *rv_dims) {\n", a->name,
               what, a->name);
    if (layout_ragged(nd, ax)) {
        buf_printf(b,
                   "    rv_dims[0] = %s_numel_%s(rv_args);\n"
                   "    return rv_dims[0] < 0 ? -1 : 1;\n}\n\n",
                   a->name, what);
        return;
    }
    begin_host_fn(a, b);
    FieldVec ufs = {0};
    bool starts = declare_starts(a, b, nd, ax, &ufs) > 0;
    buf_printf(b, "    int rv_r = %d;\n", nd);
    if (starts)
        buf_puts(b, "    if (rv_bad) {\n        rv_r = -1;\n        goto rv_out;\n    }\n");
    for (int k = 0; k < nd; k++) {
        buf_printf(b, "    rv_dims[%d] = %s_nonneg(", k, a->name);
        put_expr(a, b, ax[k]->extent);
        buf_puts(b, ");\n");
    }
    if (starts)
        buf_puts(b, "rv_out:\n");
    free_starts(a, b, &ufs);
    buf_puts(b, "    return rv_r;\n}\n\n");
}

/* Copies between X's canonical array and its padded storage: loops over
 * the canonical tuples in order (rv_c counts them), each element at the
 * storage offset the lowering indexes it with (ir_storage_offset), which
 * reads the tensor's row-start arrays among the run's slots. */
static void emit_copy(Aot *a, Buf *b, const AotSlot *s, bool pack) {
    Tensor *t = s->t;
    const Storage *st = s->buf->storage;
    const char *ct = cg_ctype(t->dtype);
    buf_printf(b,
               "static int %s_%s_%s%s(const %s_args *rv_args, void *const *rv_slot, const %s "
               "*rv_from, %s *rv_to) {\n",
               a->name, pack ? "pack" : "unpack", t->name, a->vsym, a->name, ct, ct);
    begin_host_fn(a, b);
    buf_puts(b, "    (void)rv_slot;\n");
    FieldVec ufs = {0};
    bool starts = declare_starts(a, b, t->ndim, t->axes, &ufs) > 0;
    for (int k = 0; k < st->ndim; k++) {
        if (!st->start[k])
            continue;
        const char *v = cg_name(&a->e, st->start[k], st->start[k]->name);
        buf_printf(b, "    const int64_t *%s = rv_slot[%d];\n", v,
                   slot_index(a, slot_of(a, st->start[k])));
    }
    buf_puts(b, "    int64_t rv_c = 0;\n");
    if (starts)
        buf_puts(b, "    if (rv_bad)\n        goto rv_out;\n");
    int nd = t->ndim;
    Expr *idx[RV_MAX_DIMS];
    for (int k = 0; k < nd; k++) {
        open_loop(a, b, t->axes[k], 1 + k);
        idx[k] = t->axes[k]->var;
    }
    put_indent(b, 1 + nd);
    buf_puts(b, pack ? "rv_to[" : "rv_to[rv_c] = rv_from[");
    put_expr(a, b, ir_simplify_expr(a->m, ir_storage_offset(a->m, st, idx)));
    buf_puts(b, pack ? "] = rv_from[rv_c];\n" : "];\n");
    put_indent(b, 1 + nd);
    buf_puts(b, "rv_c++;\n");
    for (int k = nd - 1; k >= 0; k--)
        close_loop(b, 1 + k);
    if (starts)
        buf_puts(b, "rv_out:\n");
    free_starts(a, b, &ufs);
    buf_printf(b, "    (void)rv_c;\n    return %s;\n}\n\n", starts ? "rv_bad" : "0");
}

/* "f32[16 * T, 768]" or "i32[b < B, l < len[b] pad 4]" */
static void put_type(Buf *b, rv_dtype dt, int nd, Axis *const *ax, const int *pad) {
    bool named = false;
    for (int k = 0; k < nd; k++)
        named = named || level_variable(ax, k) || (pad && pad[k] > 1);
    buf_printf(b, "%s[", rv_dtype_name(dt));
    for (int k = 0; k < nd; k++) {
        if (k)
            buf_puts(b, ", ");
        if (named)
            buf_printf(b, "%s < ", ax[k]->name);
        put_ir(b, ax[k]->extent);
        if (pad && pad[k] > 1)
            buf_printf(b, " pad %d", pad[k]);
    }
    buf_puts(b, "]");
}

static void kernel_param_list(Buf *b, const Kernel *k) {
    buf_puts(b, "sizes {");
    int ns = 0, nb = 0;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i].kind == PARAM_SIZE)
            buf_printf(b, "%s%s", ns++ ? ", " : "", k->params[i].size->name);
    buf_puts(b, "}, bufs {");
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i].kind != PARAM_SIZE)
            buf_printf(b, "%s%s", nb++ ? ", " : "", k->params[i].buf->name);
    buf_puts(b, "}");
}

/* The field's declaration, for comments and NAME_field_infos:
 * "size T in 1..64", "ufun len: i64[b < B] in 0..T", "X: f32[16 * T, 768]". */
static void put_decl(Buf *c, const Field *f) {
    switch (f->kind) {
    case FK_SIZE:
        buf_printf(c, "size %s in %lld..%lld", f->name, (long long)f->size->lo,
                   (long long)f->size->hi);
        return;
    case FK_UFUN:
        buf_printf(c, "ufun %s: ", f->name);
        put_type(c, f->dtype, f->uf->nargs, f->uf->args, NULL);
        buf_puts(c, " in ");
        put_ir(c, f->uf->lo);
        buf_puts(c, "..");
        put_ir(c, f->uf->hi);
        return;
    case FK_INPUT:
    case FK_OUTPUT:
        buf_printf(c, "%s: ", f->name);
        put_type(c, f->dtype, f->t->ndim, f->t->axes, f->t->pad);
        return;
    case FK_COUNT:
        break;
    }
    RV_UNREACHABLE();
}

static void emit_header(Aot *a, Buf *h, const char *src_name) {
    const char *N = a->name;
    char guard[256];
    snprintf(guard, sizeof guard, "%s_H", N);
    for (char *p = guard; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    buf_printf(h,
               "/*\n"
               " * %s.h — generated by `ravel build` from %s. Do not edit.\n"
               " *\n"
               " * A compiled model as plain C: %s.c needs only this header, ravel_rt.h\n"
               " * (copied next to it), libc and libm. Compile it with a C11 compiler, e.g.\n"
               " *\n"
               " *     cc -std=c11 -O3 -fopenmp-simd -ffp-contract=fast%s -c %s.c\n"
               " *\n"
               " * (the JIT's flags; ravel_rt.h is found next to %s.h, elsewhere add -I;\n"
               " * with GCC also -fno-tree-sra -fno-tree-loop-vectorize, as the JIT: GCC 12\n"
               " * miscompiles some of this code with its loop vectorizer). Add\n"
               " * -march=CPU for the CPUs it will run on (-march=native: this one only;\n"
               " * `ravel build --shared --march CPU` does).\n"
               " *\n"
               " * USE. Fill a %s_args with the sizes, the UF arrays and the input and\n"
               " * output arrays, and call %s_run:\n"
               " *\n"
               " *     %s_args a = {0};\n"
               " *     a.<size> = ...;                    (every size)\n"
               " *     a.<input> = <array of %s_numel_<input>(&a) elements>;\n"
               " *     a.<output> = <array of %s_numel_<output>(&a) elements>;\n"
               " *     int32_t rc = %s_run(&a, NULL);     (NULL: the default context)\n"
               " *\n"
               " * ARRAYS are flat and in canonical order, exactly the arrays `ravel eval`\n"
               " * reads and writes: row-major; a ragged tensor is 1-D with its rows packed\n"
               " * one after the other; storage padding (`pad N`) is not part of them (%s_run\n"
               " * copies padded tensors into and out of padded storage). Element types:\n"
               " * f32 float, f64 double, i32 int32_t, i64 int64_t. UF arrays are indexed by\n"
               " * their domain in the same order. The element counts depend on sizes and,\n"
               " * for ragged tensors, on UF values: %s_numel_X(&a) reads the sizes and UF\n"
               " * arrays of `a` only (-1: a UF array with a ragged domain could not be\n"
               " * indexed: memory ran out or UF values are out of range). Arrays aligned to 64 bytes (RV_RT_ALIGN) are used in\n"
               " * place; others are copied into aligned scratch memory (correct, slower).\n"
               " * An array may be NULL only when it has no elements.\n"
               " *\n"
               " * RESULT. RV_RT_OK (0); RV_RT_ERR_BOUNDS when a size or UF value is outside\n"
               " * its declared range or a non-empty array is NULL (nothing is computed);\n"
               " * RV_RT_ERR_OOM when memory ran out (outputs are then undefined).\n"
               " *\n"
               " * CONTEXT. ctx supplies a parallel-for and scratch memory (ravel_rt.h).\n"
               " * NULL: %s_default_ctx(), %s (%s_set_num_threads);\n"
               " * or pass your own (your pool's parallel_for, your allocator).\n"
               " * %s_run keeps no state between calls: calls with different args may run\n"
               " * at once when the ctx allows it (a NULL ctx does; they share the pool).\n"
               " * A failed call leaves its reason, naming the field, in %s_last_error().\n"
               " *\n"
               " * LOWER LEVEL. The kernels and preludes are exported too (%s_kernel_X,\n"
               " * %s_kernel_X_prelude) with ravel_rt.h's calling convention; %s.c lists each\n"
               " * one's parameters. %s_run is the reference for how to call them.\n"
               " */\n"
               "#ifndef %s\n#define %s\n\n"
               "#include <stddef.h>\n#include <stdint.h>\n\n#include \"ravel_rt.h\"\n\n"
               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
               N, src_name, N, a->threads != 1 ? " -pthread" : "", N, N, N, N, N, N, N, N, N, N,
               N,
               a->threads == 1
                   ? "serial (this build has no --threads)"
                   : arena_printf(a->e.arena,
                                  "parallel loops on the thread pool of\n * `ravel build --threads %d`%s",
                                  a->threads, a->threads == 0 ? " (every CPU)" : ""),
               N, N, N, N, N, N, N, guard, guard);
    /* the args struct */
    buf_printf(h, "/* The arguments of %s_run. */\ntypedef struct %s_args {\n", N, N);
    static const char *const group[FK_COUNT] = {"sizes", "UF arrays", "inputs (read only)",
                                                "outputs (written by %s_run)"};
    for (int kind = 0; kind < FK_COUNT; kind++) {
        bool first = true;
        for (int i = 0; i < a->fields.len; i++) {
            Field *f = &a->fields.data[i];
            if ((int)f->kind != kind)
                continue;
            if (first) {
                buf_puts(h, "    /* ");
                buf_printf(h, group[kind], N);
                buf_puts(h, " */\n");
                first = false;
            }
            Buf c = {0};
            if (f->kind == FK_SIZE)
                buf_printf(h, "    int64_t %s;", f->cname);
            else
                buf_printf(h, "    %s%s *%s;", f->kind == FK_OUTPUT ? "" : "const ",
                           cg_ctype(f->dtype), f->cname);
            put_decl(&c, f);
            buf_printf(h, " /* %s */\n", buf_str(&c));
            buf_free(&c);
        }
    }
    if (a->fields.len == 0)
        buf_puts(h, "    int rv_unused;\n");
    buf_printf(h, "} %s_args;\n\n", N);
    buf_printf(h,
               "/* Runs the model: checks args, runs preludes and kernels in order. ctx may\n"
               " * be NULL. Returns RV_RT_OK, RV_RT_ERR_BOUNDS or RV_RT_ERR_OOM. */\n"
               "int32_t %s_run(const %s_args *args, struct rv_rt_ctx *ctx);\n\n"
               "/* After RV_RT_ERR_BOUNDS with a ctx of yours: a read out of range or a\n"
               " * division by zero that the kernels checked, from ctx->error (NULL when\n"
               " * the arguments were rejected before any kernel ran). */\n"
               "const char *%s_check_message(int32_t error);\n\n",
               N, N, N);
    if (a->dispatch->fn || a->dispatch->c_function)
        buf_printf(h,
                   "/* Yours to define (a tuner's decision tree): the variant %s_run runs,\n"
                   " * 0..%d, for the sizes in declaration order (user is NULL). */\n"
                   "int %s_dispatch(const int64_t *sizes, void *user);\n\n",
                   N, a->nvariants - 1, N);
    buf_puts(h, "/* Elements of each array, from the sizes and UF arrays in args. */\n");
    for (int i = 0; i < a->fields.len; i++)
        if (a->fields.data[i].kind != FK_SIZE)
            buf_printf(h, "int64_t %s_numel_%s(const %s_args *args);\n", N, a->fields.data[i].name,
                       N);
    buf_printf(h,
               "\n/* A serial context: parallel_for runs the whole range on the calling thread;\n"
               " * alloc/free use aligned_alloc/free. host is NULL, or may point to an int\n"
               " * that alloc sets to 1 when it fails. */\n"
               "struct rv_rt_ctx %s_default_ctx(void);\n\n",
               N);
    buf_printf(h,
               "/* The fields of %s_args, for generic callers (drivers, bindings). */\n"
               "#define %s_FIELD_SIZE 0   /* int64_t */\n"
               "#define %s_FIELD_UFUN 1   /* const int32_t * or const int64_t * */\n"
               "#define %s_FIELD_INPUT 2  /* const T * */\n"
               "#define %s_FIELD_OUTPUT 3 /* T * */\n"
               "typedef struct %s_field {\n"
               "    const char *name;  /* as in the .rv file */\n"
               "    int kind;          /* %s_FIELD_* */\n"
               "    const char *dtype; /* \"i64\", \"i32\", \"f32\", \"f64\" */\n"
               "    size_t offset;     /* of the member in %s_args */\n"
               "    int64_t (*numel)(const %s_args *args); /* arrays; NULL for sizes */\n"
               "} %s_field;\n"
               "extern const %s_field %s_fields[];\n"
               "extern const int %s_num_fields;\n\n",
               N, N, N, N, N, N, N, N, N, N, N, N, N);
    buf_printf(h,
               "/* More about each field, in %s_fields' order (a table of its own, so\n"
               " * readers of %s_field keep its layout). */\n"
               "typedef struct %s_field_info {\n"
               "    int ndim; /* rank of the array: the declared one, 1 when ragged\n"
               "               * (packed in canonical order); 0 for sizes */\n"
               "    /* fills dims[0..ndim) from the sizes (and UF arrays) in args and\n"
               "     * returns ndim, -1 when UF values are out of range; NULL for sizes */\n"
               "    int (*shape)(const %s_args *args, int64_t *dims);\n"
               "    const char *decl; /* as declared: \"size T in 1..64\", \"X: f32[16 * T, 768]\" */\n"
               "    int64_t lo, hi;   /* sizes: the declared range; else 0 */\n"
               "} %s_field_info;\n"
               "extern const %s_field_info %s_field_infos[];\n"
               "/* sizeof(%s_args), for callers that build it from the tables. */\n"
               "extern const size_t %s_args_size;\n\n"
               "/* Why this thread's last %s_run failed, naming the field or the\n"
               " * check (\"size T = 9 is outside its declared range 1..8\", \"input X\n"
               " * is NULL but has 192 elements\"); \"\" after a success. */\n"
               "const char *%s_last_error(void);\n\n"
               "/* The threads %s_run(args, NULL) runs parallel loops on: n > 0, or 0\n"
               " * for $RAVEL_NUM_THREADS, else the CPUs this process may use. Waits\n"
               " * for the runs in flight; returns the count now used. %s\n"
               " * %s_num_threads() returns that count. */\n"
               "int32_t %s_set_num_threads(int32_t n);\n"
               "int32_t %s_num_threads(void);\n\n",
               N, N, N, N, N, N, N, N, N, N, N, N,
               a->threads == 1 ? "This build\n * (no --threads) is serial: always 1."
                               : "Built with\n * --threads: a pool embedded in the .c file.",
               N, N, N);
    buf_puts(h, "/* The kernels (ravel_rt.h calling convention), in the order they run. */\n");
    for (int k = 0; k < a->n; k++) {
        buf_printf(
            h, "int32_t %s_%s(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx);\n",
            N, a->u->kernel_syms[k]);
        if (a->u->prelude_syms[k])
            buf_printf(h, "int32_t %s_%s(const int64_t *sizes, void *const *bufs);\n", N,
                       a->u->prelude_syms[k]);
        buf_puts(h, "    /* ");
        kernel_param_list(h, a->ks[k]);
        buf_puts(h, " */\n");
    }
    buf_printf(h, "\n#ifdef __cplusplus\n}\n#endif\n#endif /* %s */\n", guard);
}

/* ---- the source ---- */

/* The helpers cg_expr recorded for the host code, less those the unit
 * already defines (the same text). */
static void emit_new_helpers(Aot *a, Buf *b) {
    for (int h = 0; h < CG_H_COUNT; h++)
        for (int t = 0; t < RV_DTYPE_COUNT; t++) {
            if (!(a->e.helpers[h] & (1u << t)))
                continue;
            CgEmit one = {.target = CG_TARGET_C};
            one.helpers[h] = 1u << t;
            Buf tmp = {0};
            cg_emit_helpers(&one, &tmp);
            const char *s = buf_str(&tmp), *sig = strstr(s, "static inline");
            const char *eol = sig ? strchr(sig, '\n') : NULL;
            char line[256] = "";
            if (sig && eol && (size_t)(eol - sig) < sizeof line)
                memcpy(line, sig, (size_t)(eol - sig));
            if (!line[0] || !strstr(a->u->source, line))
                buf_puts(b, s);
            buf_free(&tmp);
        }
}

static void emit_ctx(Aot *a, Buf *b) {
    const char *N = a->name;
    buf_printf(b,
               "/* ---- the default context: serial, aligned_alloc ---- */\n\n"
               "static void %s_serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int),\n"
               "                          void *closure) {\n"
               "    if (n > 0)\n        fn(closure, 0, n, 0);\n}\n\n"
               "static void *%s_serial_alloc(struct rv_rt_ctx *ctx, size_t bytes) {\n"
               "    size_t n = bytes < RV_RT_ALIGN ? RV_RT_ALIGN\n"
               "                                   : (bytes + RV_RT_ALIGN - 1) / RV_RT_ALIGN * "
               "RV_RT_ALIGN;\n"
               "    void *p = n >= bytes ? aligned_alloc(RV_RT_ALIGN, n) : NULL;\n"
               "    if (!p && ctx->host)\n        *(int *)ctx->host = 1;\n"
               "    return p;\n}\n\n"
               "static void %s_serial_free(struct rv_rt_ctx *ctx, void *p) {\n"
               "    (void)ctx;\n    free(p);\n}\n\n"
               "struct rv_rt_ctx %s_default_ctx(void) {\n"
               "    struct rv_rt_ctx c = {RV_RT_ABI_VERSION, 1, %s_serial_for, %s_serial_alloc,\n"
               "                          %s_serial_free, NULL, 0};\n"
               "    return c;\n}\n\n"
               "/* n elements of es bytes from ctx, zeroed; NULL when out of memory. */\n"
               "static void *%s_zalloc(struct rv_rt_ctx *ctx, int64_t n, size_t es) {\n"
               "    if (n < 0 || (uint64_t)n > SIZE_MAX / es)\n        return NULL;\n"
               "    size_t bytes = (size_t)n * es;\n"
               "    void *p = ctx->alloc(ctx, bytes ? bytes : es);\n"
               "    if (p)\n        memset(p, 0, bytes ? bytes : es);\n"
               "    return p;\n}\n\n"
               "static int %s_aligned(const void *p) {\n"
               "    return p && (uintptr_t)p %% RV_RT_ALIGN == 0;\n}\n\n"
               "static inline int64_t %s_nonneg(int64_t v) {\n    return v < 0 ? 0 : v;\n}\n\n",
               N, N, N, N, N, N, N, N, N, N);
    buf_printf(b,
               "/* The message of this thread's last failed %s_run (%s_last_error). */\n"
               "static _Thread_local char %s_error[256];\n\n"
               "static int32_t %s_fail(int32_t rc, const char *fmt, ...) {\n"
               "    va_list ap;\n"
               "    va_start(ap, fmt);\n"
               "    vsnprintf(%s_error, sizeof %s_error, fmt, ap);\n"
               "    va_end(ap);\n"
               "    return rc;\n}\n\n"
               "const char *%s_last_error(void) {\n    return %s_error;\n}\n\n",
               N, N, N, N, N, N, N, N);
    if (a->threads == 1)
        buf_printf(b,
                   "/* Built without --threads: a NULL ctx runs serially. */\n"
                   "int32_t %s_set_num_threads(int32_t n) {\n    (void)n;\n    return 1;\n}\n\n"
                   "int32_t %s_num_threads(void) {\n    return 1;\n}\n\n",
                   N, N);
    else
        cg_aot_emit_pool(b, N, a->threads);
}

/* NAME_check_message: the text of each run-time check of the kernels
 * (Kernel.sites), numbered through the kernels in order as _run leaves
 * them in ctx->error. */
static void emit_check_messages(Aot *a, Buf *b) {
    buf_printf(b, "const char *%s_check_message(int32_t error) {\n", a->name);
    int n = 0;
    for (int k = 0; k < a->n; k++)
        n += a->ks[k]->nsites;
    if (n == 0) { /* `error > 0 && error <= 0` would be a warning of its own */
        buf_puts(b, "    (void)error;\n    return NULL;\n}\n\n");
        return;
    }
    buf_puts(b, "    static const char *const rv_sites[] = {\n        \"\",\n");
    n = 0;
    for (int k = 0; k < a->n; k++)
        for (int i = 0; i < a->ks[k]->nsites; i++, n++) {
            buf_printf(b, "        \"kernel %s: ", a->ks[k]->name);
            for (const char *p = a->ks[k]->sites[i]; *p; p++)
                buf_printf(b, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
            buf_puts(b, "\",\n");
        }
    buf_printf(b,
               "    };\n    return error > 0 && error <= %d ? rv_sites[error] : NULL;\n}\n\n", n);
}

/* Checks the buffer size expression only loads slots' UF and AUX arrays. */
typedef struct LoadCheck {
    Aot *a;
    const Buffer *bad;
} LoadCheck;

static void check_load(const Expr *e, void *ctx) {
    LoadCheck *c = ctx;
    if (e->kind == EX_LOAD && !c->bad) {
        AotSlot *s = slot_of(c->a, e->u.buf);
        if (!s || s->kind == PLAN_SLOT_TENSOR || s->buf != e->u.buf)
            c->bad = e->u.buf;
    }
}

/* The size of a slot's buffer into rv_n. */
static void emit_slot_size(Aot *a, Buf *b, const AotSlot *s) {
    LoadCheck c = {.a = a};
    ir_visit(s->buf->size, check_load, &c);
    if (c.bad && a->st == RV_OK)
        a->st = base_error(RV_ERR_UNSUPPORTED,
                           "buffer %s: its size reads %s, which the host code cannot see",
                           s->buf->name, c.bad->name);
    buf_puts(b, "    rv_n = ");
    cg_expr(&a->e, b, s->buf->size);
    buf_puts(b, ";\n");
}

/* The call of kernel k (or its prelude) with its sizes and buffers. */
static void emit_call(Aot *a, Buf *b, int k, bool prelude) {
    const Kernel *kn = a->ks[k];
    buf_puts(b, "    {\n        const int64_t rv_sz[] = {");
    int ns = 0;
    for (int i = 0; i < kn->nparams; i++)
        if (kn->params[i].kind == PARAM_SIZE)
            buf_printf(b, "%s%s", ns++ ? ", " : "",
                       cg_name(&a->e, kn->params[i].size, kn->params[i].size->name));
    if (!ns)
        buf_puts(b, "0");
    buf_puts(b, "};\n        void *const rv_bf[] = {");
    int nb = 0;
    for (int i = 0; i < kn->nparams; i++)
        if (kn->params[i].kind != PARAM_SIZE)
            buf_printf(b, "%srv_slot[%d]", nb++ ? ", " : "",
                       slot_index(a, slot_of(a, kn->params[i].buf)));
    if (!nb)
        buf_puts(b, "NULL");
    buf_puts(b, "};\n");
    if (prelude) {
        buf_printf(b,
                   "        if (%s_%s(rv_sz, rv_bf) != RV_RT_OK) {\n"
                   "            rv_rc = RV_RT_ERR_BOUNDS;\n            goto rv_done;\n        }\n",
                   a->name, a->u->prelude_syms[k]);
    } else {
        int first = 0; /* the kernel's sites are numbered after the earlier ones' */
        for (int i = 0; i < k; i++)
            first += a->ks[i]->nsites;
        buf_printf(b,
                   "        rv_rc = %s_%s(rv_sz, rv_bf, rv_ctx);\n"
                   "        if (*rv_failed)\n            rv_rc = RV_RT_ERR_OOM;\n"
                   "        if (rv_rc == RV_RT_OK && rv_ctx->error) {\n"
                   "            rv_ctx->error += %d;\n"
                   "            rv_rc = RV_RT_ERR_BOUNDS;\n        }\n"
                   "        if (rv_rc != RV_RT_OK)\n            goto rv_done;\n",
                   a->name, a->u->kernel_syms[k], first);
    }
    buf_puts(b, "    }\n");
}

#define OOM_EXIT "rv_rc = RV_RT_ERR_OOM;\n        goto rv_done;\n"

/* Places tensor slot s: user array in place, a copy, or storage. */
static void emit_place_tensor(Aot *a, Buf *b, const AotSlot *s) {
    const char *N = a->name;
    int i = slot_index(a, s);
    const Field *f = s->field >= 0 ? &a->fields.data[s->field] : NULL;
    const char *ct = cg_ctype(s->t->dtype);
    buf_printf(b, "    /* tensor %s: %s */\n", s->t->name,
               !f                    ? "an intermediate"
               : f->kind == FK_INPUT ? "an input"
                                     : "an output");
    emit_slot_size(a, b, s);
    buf_printf(b, "    rv_nel[%d] = rv_n;\n", i);
    if (!f) {
        buf_printf(b,
                   "    if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
                   "        " OOM_EXIT "    }\n",
                   i, i, N, ct);
        return;
    }
    const char *arr = arena_printf(a->e.arena, "rv_args->%s", f->cname);
    buf_printf(b,
               "    if (!%s && %s_numel_%s(rv_args) > 0) {\n"
               "        rv_rc = %s_fail(RV_RT_ERR_BOUNDS, \"%s %s is NULL but has %%lld elements\",\n"
               "                        (long long)%s_numel_%s(rv_args));\n"
               "        goto rv_done;\n    }\n",
               arr, N, f->name, N, f->kind == FK_INPUT ? "input" : "output", f->name, N, f->name);
    if (ir_storage_padded(s->buf->storage)) {
        buf_printf(b,
                   "    if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
                   "        " OOM_EXIT "    }\n",
                   i, i, N, ct);
        if (f->kind == FK_INPUT)
            buf_printf(b,
                       "    if (%s_pack_%s%s(rv_args, rv_slot, %s, rv_slot[%d])) {\n"
                       "        " OOM_EXIT "    }\n",
                       N, s->t->name, a->vsym, arr, i);
        return;
    }
    /* an empty array gets a zeroed element of its own (zalloc): kernels
     * read a buffer's origin where a guard fails (the CPU runtime's
     * empty_origin) */
    buf_printf(b,
               "    if (rv_n > 0 && %s_aligned(%s)) {\n        rv_slot[%d] = (void *)%s;\n    } else "
               "{\n",
               N, arr, i, arr);
    buf_printf(b,
               "        if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
               "            rv_rc = RV_RT_ERR_OOM;\n            goto rv_done;\n        }\n",
               i, i, N, ct);
    if (f->kind == FK_INPUT)
        buf_printf(b,
                   "        if (rv_n > 0)\n            memcpy(rv_slot[%d], %s, (size_t)rv_n * "
                   "sizeof(%s));\n",
                   i, arr, ct);
    buf_puts(b, "    }\n");
}

/* CHECK_ARGS: sizes and UF values within their declared ranges. */
static void emit_check_args(Aot *a, Buf *b) {
    const char *N = a->name;
    buf_puts(b, "    /* sizes and UF values within their declared ranges */\n");
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        if (f->kind != FK_SIZE)
            continue;
        const char *v = cg_name(&a->e, f->size, f->size->name);
        buf_printf(b,
                   "    if (%s < %lldLL || %s > %lldLL)\n"
                   "        return %s_fail(RV_RT_ERR_BOUNDS, \"size %s = %%lld is outside its "
                   "declared range %lld..%lld\", (long long)%s);\n",
                   v, (long long)f->size->lo, v, (long long)f->size->hi, N, f->name,
                   (long long)f->size->lo, (long long)f->size->hi, v);
    }
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        if (f->kind != FK_UFUN)
            continue;
        const char *v = cg_name(&a->e, f->ufbuf, f->uf->name);
        buf_printf(b, "    {\n        const int64_t rv_m = %s_numel_%s(rv_args);\n", N, f->name);
        buf_printf(b,
                   "        if (rv_m < 0)\n"
                   "            return %s_fail(RV_RT_ERR_BOUNDS, \"ufun %s: its element count "
                   "cannot be computed (the values of a UF it depends on are out of range)\");\n"
                   "        if (!%s && rv_m > 0)\n"
                   "            return %s_fail(RV_RT_ERR_BOUNDS, \"ufun %s is NULL but has %%lld "
                   "elements\", (long long)rv_m);\n",
                   N, f->name, v, N, f->name);
        /* the range over the whole domain, which is what the kernels
         * assume; a range that uses the UF's arguments is checked per
         * element by the interpreter and the JIT runtime only */
        buf_puts(b, "        const int64_t rv_lo = ");
        put_expr(a, b, f->uf->lo_dom);
        buf_puts(b, ", rv_hi = ");
        put_expr(a, b, f->uf->hi_dom);
        buf_printf(b,
                   ";\n        for (int64_t rv_i = 0; rv_i < rv_m; rv_i++)\n"
                   "            if (%s[rv_i] < rv_lo || %s[rv_i] > rv_hi)\n"
                   "                return %s_fail(RV_RT_ERR_BOUNDS, \"ufun %s: element %%lld is "
                   "%%lld, outside its range %%lld..%%lld\", (long long)rv_i, (long long)%s[rv_i], "
                   "(long long)rv_lo, (long long)rv_hi);\n    }\n",
                   v, v, N, f->name, v);
    }
}

/* PLACE_UF: the user's array in place when aligned, else a copy. */
static void emit_place_uf(Aot *a, Buf *b, int i) {
    const char *N = a->name;
    AotSlot *s = &a->slots.data[i];
    Field *f = &a->fields.data[s->field];
    const char *ct = cg_ctype(s->buf->dtype);
    if (s->buf->dtype != f->dtype && a->st == RV_OK)
        a->st = base_error(RV_ERR_UNSUPPORTED, "ufun %s: kernels disagree on its dtype", f->name);
    buf_printf(b, "    /* ufun %s */\n    rv_n = %s_numel_%s(rv_args);\n    rv_nel[%d] = rv_n;\n",
               f->name, N, f->name, i);
    buf_printf(b,
               "    if (rv_n > 0 && %s_aligned(rv_args->%s)) {\n"
               "        rv_slot[%d] = (void *)rv_args->%s;\n",
               N, f->cname, i, f->cname);
    buf_printf(b,
               "    } else {\n"
               "        if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
               "            rv_rc = RV_RT_ERR_OOM;\n            goto rv_done;\n        }\n"
               "        if (rv_n > 0)\n"
               "            memcpy(rv_slot[%d], rv_args->%s, (size_t)rv_n * sizeof(%s));\n"
               "    }\n",
               i, i, N, ct, i, f->cname, ct);
    buf_printf(b, "    const %s *%s = rv_slot[%d];\n    (void)%s;\n", ct,
               cg_name(&a->e, s->buf, s->buf->name), i, cg_name(&a->e, s->buf, s->buf->name));
}

/* ALLOC_AUX: zeroed, its size over sizes only. */
static void emit_alloc_aux(Aot *a, Buf *b, int i) {
    AotSlot *s = &a->slots.data[i];
    const char *ct = cg_ctype(s->buf->dtype);
    emit_slot_size(a, b, s);
    buf_printf(b,
               "    rv_nel[%d] = rv_n;\n"
               "    if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
               "        " OOM_EXIT "    }\n",
               i, i, i, a->name, ct);
    const char *v = cg_name(&a->e, s->buf, s->buf->name);
    buf_printf(b, "    const %s *%s = rv_slot[%d];\n    (void)%s;\n", ct, v, i, v);
}

/* PLACE_PACK: a param's pack and its fill flag. The generated library
 * keeps no state between calls (its functions are reentrant, NAME_run's
 * contract): every call fills the pack, flag 1, as the CUDA target does;
 * docs/schedules.md, "Packs of params". */
static void emit_place_pack(Aot *a, Buf *b, int i) {
    AotSlot *s = &a->slots.data[i];
    const PlanSlot *fs = plan_slot_for(&a->plan, s->buf->pack_fill);
    RV_ASSERT(fs);
    int j = plan_slot_index(&a->plan, fs);
    const char *ct = cg_ctype(s->buf->dtype);
    emit_slot_size(a, b, s);
    buf_printf(b,
               "    rv_nel[%d] = rv_n;\n"
               "    if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, rv_n, sizeof(%s)))) {\n"
               "        " OOM_EXIT "    }\n"
               "    rv_nel[%d] = 2;\n"
               "    if (!(rv_own[%d] = rv_slot[%d] = %s_zalloc(rv_ctx, 2, sizeof(int32_t)))) {\n"
               "        " OOM_EXIT "    }\n"
               "    *(int32_t *)rv_slot[%d] = 1; /* fill it */\n",
               i, i, i, a->name, ct, j, j, j, a->name, j);
}

/* CHECK_UF_SIZE: the kernels' size of a UF array (a ragged domain's loads
 * the row starts the preludes filled) against the user's. */
static void emit_check_uf_size(Aot *a, Buf *b, int i) {
    AotSlot *s = &a->slots.data[i];
    buf_printf(b, "    /* ufun %s: the kernels' size of its array */\n", s->buf->uf->name);
    emit_slot_size(a, b, s);
    buf_printf(b,
               "    if (rv_n != rv_nel[%d]) {\n"
               "        rv_rc = %s_fail(RV_RT_ERR_BOUNDS, \"ufun %s: its values give the kernels "
               "%%lld elements, its array %%lld\", (long long)rv_n, (long long)rv_nel[%d]);\n"
               "        goto rv_done;\n    }\n",
               i, a->name, s->buf->uf->name, i);
}

/* RESULT: an output computed elsewhere than in the user's array is
 * copied (or unpacked from padded storage) into it; intermediates stay. */
static void emit_result(Aot *a, Buf *b, const PlanStep *step) {
    const char *N = a->name;
    if (!step->output)
        return;
    if (step->slot < 0) {
        if (a->st == RV_OK)
            a->st = base_error(RV_ERR_UNSUPPORTED, "tensor %s: no compiled kernel stores it",
                               step->t->name);
        return;
    }
    int i = step->slot;
    AotSlot *s = &a->slots.data[i];
    const char *cn = a->fields.data[s->field].cname;
    if (ir_storage_padded(s->buf->storage))
        buf_printf(b,
                   "    if (%s_unpack_%s%s(rv_args, rv_slot, rv_slot[%d], rv_args->%s))\n"
                   "        rv_rc = RV_RT_ERR_OOM;\n",
                   N, s->t->name, a->vsym, i, cn);
    else
        buf_printf(b,
                   "    if (rv_slot[%d] != (void *)rv_args->%s && rv_nel[%d] > 0)\n"
                   "        memcpy(rv_args->%s, rv_slot[%d], (size_t)rv_nel[%d] * sizeof(%s));\n",
                   i, cn, i, cn, i, i, cg_ctype(s->t->dtype));
}

/* The C name of the placed array of UF f among kernel kn's parameters
 * (declared by PLACE_UF), or NULL when kn does not take it. */
static const char *uf_array(Aot *a, const Kernel *kn, const Ufun *f, Buf *b, const char *var) {
    for (int i = 0; i < kn->nparams; i++)
        if (kn->params[i].kind == PARAM_UF && kn->params[i].buf->uf == f) {
            buf_printf(b, "        const %s *%s = rv_slot[%d];\n",
                       cg_ctype(kn->params[i].buf->dtype), var,
                       slot_index(a, slot_of(a, kn->params[i].buf)));
            return var;
        }
    return NULL;
}

/* The unrolled partition's check (rt_check_unroll) as C, for a kernel of
 * unroll_recursion() (it reads nchild, child and the partition): the
 * unrolled iterations replayed over the arrays, rv_dn[n] 0 not done, 1 a
 * leaf, u + 2 computed in unrolled batch u; sets rv_bad. */
static void emit_check_unroll(Aot *a, Buf *b, const Kernel *kn, const char *N) {
    const Structure *T = kn->rec->st;
    if (!T->unroll_node || !uf_array(a, kn, T->unroll_node, b, "rv_un"))
        return;
    uf_array(a, kn, T->unroll_begin, b, "rv_ub");
    uf_array(a, kn, T->unroll_length, b, "rv_ul");
    buf_printf(b,
               "        int64_t *rv_st = calloc((size_t)%s + 1, sizeof(int64_t));\n"
               "        int64_t *rv_dn = calloc((size_t)%s + 1, sizeof(int64_t));\n"
               "        rv_bad |= !rv_st || !rv_dn;\n"
               "        for (int64_t rv_n = 0; rv_n < %s && !rv_bad; rv_n++) {\n"
               "            rv_st[rv_n + 1] = rv_st[rv_n] + rv_nc[rv_n];\n"
               "            rv_dn[rv_n] = rv_nc[rv_n] == 0;\n        }\n"
               "        int64_t rv_ut = 0;\n"
               "        for (int64_t rv_u = 0; rv_u < %s && !rv_bad; rv_u++) {\n"
               "            rv_bad = rv_ub[rv_u] != rv_ut || rv_ut + rv_ul[rv_u] > %s;\n"
               "            for (int64_t rv_j = rv_ut; rv_j < rv_ut + rv_ul[rv_u] && !rv_bad; "
               "rv_j++) {\n"
               "                int64_t rv_h = rv_un[rv_j];\n"
               "                rv_bad = rv_nc[rv_h] == 0 || rv_dn[rv_h] != 0;\n"
               "                for (int64_t rv_e = rv_st[rv_h]; rv_e < rv_st[rv_h + 1] && "
               "!rv_bad; rv_e++) {\n"
               "                    int64_t rv_c = rv_ch[rv_e];\n"
               "                    if (rv_nc[rv_c] == 0)\n                        continue;\n"
               "                    rv_bad = rv_dn[rv_c] != 0;\n"
               "                    for (int64_t rv_f = rv_st[rv_c]; rv_f < rv_st[rv_c + 1] && "
               "!rv_bad; rv_f++)\n"
               "                        rv_bad = rv_dn[rv_ch[rv_f]] == 0 || rv_dn[rv_ch[rv_f]] "
               "== rv_u + 2;\n"
               "                    rv_dn[rv_c] = rv_u + 2;\n                }\n"
               "                rv_dn[rv_h] = rv_u + 2;\n            }\n"
               "            rv_ut += rv_ul[rv_u];\n        }\n"
               "        for (int64_t rv_n = 0; rv_n < %s && !rv_bad; rv_n++)\n"
               "            rv_bad = !rv_dn[rv_n];\n"
               "        free(rv_st);\n        free(rv_dn);\n",
               N, N, N, cg_name(&a->e, T->nunroll, T->nunroll->name), N, N);
}

/* CHECK_STRUCT: runtime/numbering.c's check as C (a violation is
 * RV_RT_ERR_BOUNDS): every child numbered above its parent and, when the
 * kernel reads the batches, the batches consecutive from the top, batch 0
 * exactly the leaves, every child in an earlier batch; the unrolled
 * partition when the kernel reads it. */
static void emit_check_struct(Aot *a, Buf *b, int k) {
    const Kernel *kn = a->ks[k];
    const Structure *T = kn->rec->st;
    buf_printf(b, "    {   /* structure %s, as recursion %s numbers it */\n", T->name,
               kn->rec->name);
    const char *nc = uf_array(a, kn, T->nchild, b, "rv_nc");
    const char *ch = uf_array(a, kn, T->child, b, "rv_ch");
    const char *bb = uf_array(a, kn, T->batch_begin, b, "rv_bb");
    const char *bl = bb ? uf_array(a, kn, T->batch_length, b, "rv_bl") : NULL;
    const char *N = cg_name(&a->e, T->nodes, T->nodes->name);
    buf_puts(b, "        int rv_bad = 0;\n        int64_t rv_at = 0, rv_b = 0, rv_top = 0;\n");
    if (bb && bl) {
        buf_printf(b,
                   "        for (rv_b = %s - 1; rv_b >= 0 && !rv_bad; rv_b--) {\n"
                   "            rv_bad = rv_bb[rv_b] != rv_top;\n"
                   "            rv_top += rv_bl[rv_b];\n        }\n"
                   "        rv_bad |= rv_top != %s;\n        rv_b = %s - 1;\n",
                   cg_name(&a->e, T->nbatch, T->nbatch->name), N,
                   cg_name(&a->e, T->nbatch, T->nbatch->name));
    }
    if (nc) {
        buf_printf(b, "        for (int64_t rv_n = 0; rv_n < %s && !rv_bad; rv_n++) {\n", N);
        if (bb && bl)
            buf_puts(b, "            while (rv_n >= rv_bb[rv_b] + rv_bl[rv_b])\n"
                        "                rv_b--;\n"
                        "            rv_bad |= (rv_nc[rv_n] == 0) != (rv_b == 0);\n");
        if (ch)
            buf_printf(b,
                       "            for (int64_t rv_k = 0; rv_k < rv_nc[rv_n]; rv_k++, rv_at++)\n"
                       "                rv_bad |= rv_ch[rv_at] <= rv_n%s;\n",
                       bb && bl ? " || rv_ch[rv_at] < rv_bb[rv_b] + rv_bl[rv_b]" : "");
        buf_puts(b, "        }\n");
    }
    if (nc && ch)
        emit_check_unroll(a, b, kn, N);
    buf_puts(b, "        (void)rv_at;\n        (void)rv_b;\n        (void)rv_top;\n        if (rv_bad) {\n            rv_rc = RV_RT_ERR_BOUNDS;\n"
                "            goto rv_done;\n        }\n    }\n");
}

/* One step of the plan as C. */
static void emit_step(Aot *a, Buf *b, const PlanStep *step) {
    if (step->kind != PLAN_CHECK_ARGS)
        buf_printf(b, "    /* plan: %s */\n", plan_step_name(step->kind));
    switch (step->kind) {
    case PLAN_CHECK_ARGS:
        emit_check_args(a, b);
        return;
    case PLAN_PLACE_UF:
        emit_place_uf(a, b, step->slot);
        return;
    case PLAN_ALLOC_AUX:
        emit_alloc_aux(a, b, step->slot);
        return;
    case PLAN_PRELUDE:
        emit_call(a, b, a->variant_first[a->v] + step->kernel, true);
        return;
    case PLAN_CHECK_UF_SIZE:
        emit_check_uf_size(a, b, step->slot);
        return;
    case PLAN_PLACE_TENSOR:
        emit_place_tensor(a, b, &a->slots.data[step->slot]);
        return;
    case PLAN_PLACE_PACK:
        emit_place_pack(a, b, step->slot);
        return;
    case PLAN_CALL:
        emit_call(a, b, a->variant_first[a->v] + step->kernel, false);
        return;
    case PLAN_RESULT:
        emit_result(a, b, step);
        return;
    case PLAN_RETURN: /* the results are in the user's arrays */
        return;
    case PLAN_TO_DEVICE:
    case PLAN_CHECK_STRUCT:
        emit_check_struct(a, b, a->variant_first[a->v] + step->kernel);
        return;
    case PLAN_FROM_DEVICE:
    case PLAN_STEP_COUNT:
        break;
    }
    RV_UNREACHABLE(); /* ravel build targets the CPU */
}

/* NAME_run_vN: variant N's plan after the argument checks. Every
 * slot's storage is freed at rv_done, where a failed step jumps.
 * *rv_failed: the default context ran out of memory. */
static void emit_run_variant(Aot *a, Buf *b) {
    const char *N = a->name;
    int ns = a->slots.len;
    buf_printf(b,
               "static int32_t %s_run%s(const %s_args *rv_args, struct rv_rt_ctx *rv_ctx,\n"
               "                        const int *rv_failed) {\n",
               N, a->vsym, N);
    begin_host_fn(a, b);
    buf_printf(b,
               "    /* one buffer per plan slot: UF arrays, AUX arrays, tensors */\n"
               "    void *rv_slot[%d] = {0};\n    void *rv_own[%d] = {0};\n"
               "    int64_t rv_nel[%d] = {0};\n    int64_t rv_n = 0;\n"
               "    int32_t rv_rc = RV_RT_OK;\n"
               "    rv_ctx->error = 0;\n",
               ns + 1, ns + 1, ns + 1);
    const Plan *p = &a->plan;
    RV_ASSERT(p->steps.len > 0 && p->steps.data[0].kind == PLAN_CHECK_ARGS);
    for (int i = 1; i < p->steps.len; i++)
        emit_step(a, b, &p->steps.data[i]);
    buf_printf(b,
               "rv_done:\n"
               "    for (int rv_i = 0; rv_i < %d; rv_i++)\n"
               "        rv_ctx->free(rv_ctx, rv_own[rv_i]);\n"
               "    (void)rv_n;\n    (void)rv_nel;\n"
               "    return rv_rc;\n}\n\n",
               ns + 1);
}

/* The dispatch as C, into rv_v: the user's NAME_dispatch over the sizes
 * in module order, or the rule table (first match, else variant 0). */
static void emit_dispatch(Aot *a, Buf *b) {
    const PlanDispatch *d = a->dispatch;
    const Module *m = a->m;
    buf_puts(b, "    /* dispatch: the variant for these sizes */\n    int rv_v = 0;\n");
    bool fn = d->fn || d->c_function;
    if (fn) {
        buf_printf(b, "    {\n        %sint64_t rv_sizes[] = {", d->nsums ? "" : "const ");
        for (int i = 0; i < m->sizes.len; i++)
            buf_printf(b, "%s%s", i ? ", " : "", cg_name(&a->e, m->sizes.data[i], m->sizes.data[i]->name));
        for (int q = 0; q < d->nsums; q++)
            buf_printf(b, "%s0", m->sizes.len + q ? ", " : "");
        buf_printf(b, "%s};\n", m->sizes.len + d->nsums ? "" : "0");
        /* then the sums of the UFs it reads (plan.h) */
        for (int q = 0; q < d->nsums; q++) {
            Ufun *f = d->sums[q];
            buf_printf(b, "        for (int64_t rv_i = 0; rv_i < ");
            put_expr(a, b, f->args[0]->extent);
            buf_printf(b, "; rv_i++)\n            rv_sizes[%d] += (int64_t)%s[rv_i];\n",
                       m->sizes.len + q, cg_name(&a->e, field_of(a, f)->ufbuf, f->name));
        }
        buf_printf(b, "        rv_v = %s_dispatch(rv_sizes, NULL);\n    }\n", a->name);
    }
    for (int r = 0; !fn && r < d->nrules; r++) {
        const PlanRule *rule = &d->rules[r];
        buf_printf(b, "    %sif (", r ? "else " : "");
        for (int i = 0; i < rule->nsizes; i++) {
            const char *v = cg_name(&a->e, rule->size[i], rule->size[i]->name);
            buf_printf(b, "%s(%s >= %lldLL && %s <= %lldLL)", i ? " && " : "", v,
                       (long long)rule->lo[i], v, (long long)rule->hi[i]);
        }
        buf_printf(b, "%s)\n        rv_v = %d;\n", rule->nsizes ? "" : "1", rule->variant);
    }
}

/* A variant compiled for constant sizes (PlanDispatch.at) runs only at
 * them: the dispatch choosing it elsewhere fails the run, as the runtime
 * does (plan_dispatch_pick). */
static void emit_variant_guard(Aot *a, Buf *b, int v) {
    const PlanAt *at = a->dispatch->at ? &a->dispatch->at[v] : NULL;
    if (!at || !at->nsizes)
        return;
    buf_puts(b, "        if (");
    for (int i = 0; i < at->nsizes; i++)
        buf_printf(b, "%s%s != %lldLL", i ? " || " : "",
                   cg_name(&a->e, at->size[i], at->size[i]->name), (long long)at->value[i]);
    buf_printf(
        b,
        ") {\n            rv_rc = %s_fail(RV_RT_ERR_BOUNDS, \"the dispatch chose variant %d, "
        "compiled for ",
        a->name, v);
    for (int i = 0; i < at->nsizes; i++)
        buf_printf(b, "%s%s = %lld", i ? ", " : "", at->size[i]->name, (long long)at->value[i]);
    buf_puts(b, "\");\n            break;\n        }\n");
}

/* NAME_run: the plan's first step (the argument checks), the dispatch
 * among variants, the context (NULL: the default one, on the embedded pool
 * when there is one) and the chosen variant's remaining steps; a failure
 * leaves its message for NAME_last_error. */
static void emit_run(Aot *a, Buf *b) {
    const char *N = a->name;
    bool pool = a->threads != 1;
    buf_printf(b, "int32_t %s_run(const %s_args *rv_args, struct rv_rt_ctx *rv_ctx) {\n", N, N);
    begin_host_fn(a, b);
    buf_printf(b, "    %s_error[0] = '\\0';\n", N);
    emit_step(a, b, &a->plan.steps.data[0]);
    if (a->nvariants > 1)
        emit_dispatch(a, b);
    buf_printf(b,
               "    int rv_failed = 0;\n"
               "    struct rv_rt_ctx rv_serial;\n"
               "    int rv_pooled = 0;\n"
               "    if (!rv_ctx) {\n"
               "        rv_serial = %s_default_ctx();\n"
               "        rv_serial.host = &rv_failed;\n"
               "        rv_ctx = &rv_serial;\n",
               N);
    if (pool)
        buf_printf(b, "        %s_pool_take(rv_ctx);\n        rv_pooled = 1;\n", N);
    buf_puts(b, "    }\n    int32_t rv_rc;\n");
    if (a->nvariants == 1) {
        buf_printf(b, "    rv_rc = %s_run_v0(rv_args, rv_ctx, &rv_failed);\n", N);
    } else {
        buf_puts(b, "    switch (rv_v) {\n");
        for (int v = 0; v < a->nvariants; v++) {
            buf_printf(b, "    case %d:\n", v);
            emit_variant_guard(a, b, v);
            buf_printf(b,
                       "        rv_rc = %s_run_v%d(rv_args, rv_ctx, &rv_failed);\n"
                       "        break;\n",
                       N, v);
        }
        buf_printf(b,
                   "    default:\n"
                   "        rv_rc = %s_fail(RV_RT_ERR_BOUNDS, \"the dispatch chose variant %%d, "
                   "not one of 0..%d\", rv_v);\n    }\n",
                   N, a->nvariants - 1);
    }
    if (pool)
        buf_printf(b, "    if (rv_pooled)\n        %s_pool_give();\n", N);
    else
        buf_puts(b, "    (void)rv_pooled;\n");
    buf_printf(b,
               "    if (rv_rc == RV_RT_ERR_OOM && !%s_error[0])\n"
               "        %s_fail(rv_rc, \"out of memory\");\n"
               "    else if (rv_rc == RV_RT_ERR_BOUNDS && rv_ctx->error)\n"
               "        %s_fail(rv_rc, \"%%s\", %s_check_message(rv_ctx->error));\n"
               "    return rv_rc;\n}\n\n",
               N, N, N, N);
}

static void emit_fields_table(Aot *a, Buf *b) {
    const char *N = a->name;
    buf_printf(b, "const %s_field %s_fields[] = {\n", N, N);
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        buf_printf(b, "    {\"%s\", %s_FIELD_%s, \"%s\", offsetof(%s_args, %s), ", f->name, N,
                   field_kind_macro[f->kind], rv_dtype_name(f->dtype), N, f->cname);
        if (f->kind == FK_SIZE)
            buf_puts(b, "NULL},\n");
        else
            buf_printf(b, "%s_numel_%s},\n", N, f->name);
    }
    if (a->fields.len == 0)
        buf_puts(b, "    {NULL, 0, NULL, 0, NULL},\n");
    buf_printf(b, "};\nconst int %s_num_fields = %d;\n", N, a->fields.len);
    buf_printf(b, "const %s_field_info %s_field_infos[] = {\n", N, N);
    for (int i = 0; i < a->fields.len; i++) {
        Field *f = &a->fields.data[i];
        Buf d = {0};
        put_decl(&d, f);
        int nd = f->kind == FK_UFUN ? f->uf->nargs : f->kind == FK_SIZE ? 0 : f->t->ndim;
        Axis *const *ax = f->kind == FK_UFUN ? f->uf->args : f->kind == FK_SIZE ? NULL : f->t->axes;
        if (f->kind == FK_SIZE)
            buf_printf(b, "    {0, NULL, \"%s\", %lldLL, %lldLL},\n", buf_str(&d),
                       (long long)f->size->lo, (long long)f->size->hi);
        else
            buf_printf(b, "    {%d, %s_shape_%s, \"%s\", 0, 0},\n", layout_ragged(nd, ax) ? 1 : nd, N,
                       f->name, buf_str(&d));
        buf_free(&d);
    }
    if (a->fields.len == 0)
        buf_puts(b, "    {0, NULL, NULL, 0, 0},\n");
    buf_printf(b, "};\nconst size_t %s_args_size = sizeof(%s_args);\n\n", N, N);
}

rv_status cg_c_aot(Module *m, Kernel *const *ks, int n, int nvariants, const int *variant_first,
                   const PlanDispatch *dispatch, const CgUnit *u, const char *name,
                   const char *src_name, int threads, CgAot *out) {
    memset(out, 0, sizeof *out);
    static const int one_first[1] = {0};
    static const PlanDispatch one = {.nvariants = 1};
    Aot a = {.m = m,
             .ks = ks,
             .n = n,
             .nvariants = nvariants > 0 ? nvariants : 1,
             .variant_first = nvariants > 0 ? variant_first : one_first,
             .dispatch = nvariants > 1 ? dispatch : &one,
             .u = u,
             .name = name,
             .threads = threads};
    cg_emit_init(&a.e, CG_TARGET_C);
    gather(&a);
    rv_status st = a.st;
    Buf c = {0}, h = {0}, body = {0}, starts = {0};
    if (st == RV_OK) {
        /* the host code first, into body, so the helpers it needs are known */
        for (int i = 0; i < a.fields.len; i++) {
            const Field *f = &a.fields.data[i];
            if (f->kind == FK_SIZE)
                continue;
            int nd = f->kind == FK_UFUN ? f->uf->nargs : f->t->ndim;
            Axis *const *ax = f->kind == FK_UFUN ? f->uf->args : f->t->axes;
            emit_numel(&a, &body, f->name, nd, ax);
            emit_shape(&a, &body, f->name, nd, ax);
        }
        for (int v = 0; v < a.nvariants; v++) {
            take_variant(&a, v);
            for (int i = 0; i < a.slots.len; i++) {
                const AotSlot *s = &a.slots.data[i];
                if (s->kind == PLAN_SLOT_TENSOR && s->field >= 0 &&
                    ir_storage_padded(s->buf->storage))
                    emit_copy(&a, &body, s, a.fields.data[s->field].kind == FK_INPUT);
            }
            emit_run_variant(&a, &body);
        }
        emit_run(&a, &body);
        emit_check_messages(&a, &body);
        emit_fields_table(&a, &body);
        for (int i = 0; i < a.fields.len; i++)
            if (ptrmap_has(&a.starts_used, &a.fields.data[i]))
                emit_starts(&a, &starts, &a.fields.data[i]);
        st = a.st;
    }
    if (st == RV_OK) {
        emit_header(&a, &h, src_name);
        buf_printf(&c,
                   "/*\n * %s.c — generated by `ravel build` from %s. Do not edit.\n"
                   " * The API is in %s.h; below are the kernels (ravel emit's translation\n"
                   " * unit, each kernel_X renamed %s_kernel_X) and the host code that runs\n"
                   " * them.\n */\n",
                   name, src_name, name, name);
        if (threads != 1) /* the embedded pool's pthreads, sched_getaffinity */
            buf_puts(&c, "#ifndef _GNU_SOURCE\n#define _GNU_SOURCE\n#endif\n");
        buf_printf(&c,
                   "#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n"
                   "#include <stdio.h>\n#include <stdlib.h>\n"
                   "#include <string.h>\n\n#include \"%s.h\"\n\n",
                   name);
        for (int k = 0; k < n; k++) {
            buf_printf(&c, "#define %s %s_%s\n", u->kernel_syms[k], name, u->kernel_syms[k]);
            if (u->prelude_syms[k])
                buf_printf(&c, "#define %s %s_%s\n", u->prelude_syms[k], name, u->prelude_syms[k]);
        }
        buf_puts(&c, "\n/* ==== the kernels (cg_c_module) ==== */\n\n");
        buf_puts(&c, u->source ? u->source : "");
        buf_printf(&c, "\n/* ==== the host code ==== */\n\n");
        emit_new_helpers(&a, &c);
        emit_ctx(&a, &c);
        buf_puts(&c, buf_str(&starts));
        buf_puts(&c, buf_str(&body));
        out->source = buf_take(&c);
        out->header = buf_take(&h);
    }
    buf_free(&c);
    buf_free(&h);
    buf_free(&body);
    buf_free(&starts);
    cg_emit_free(&a.e);
    vec_free(&a.fields);
    vec_free(&a.slots);
    plan_free(&a.plan);
    ptrmap_free(&a.field_of);
    ptrmap_free(&a.starts);
    ptrmap_free(&a.starts_used);
    return st;
}

void cg_aot_free(CgAot *a) {
    base_free(a->source);
    base_free(a->header);
    a->source = a->header = NULL;
}
