/*
 * fuzz_common.h — what the two differential fuzzers share: the schedule
 * fuzzer (tests/fuzz_sched.c: random schedules of fixed programs) and the
 * program fuzzer (tests/fuzz_programs.c: random programs with random
 * schedules). Both compare compiled code with the reference interpreter.
 *
 * The map of tests/fuzz_common.c:
 *   - a seeded random generator (splitmix64) and small helpers;
 *   - the stages and loops of a schedule, copied from
 *     rv_module_schedule_info;
 *   - a program: its sizes with their ranges, its tensors and what each
 *     definition reads (scanned from the source and the module), and size
 *     assignments with the interpreter's results;
 *   - the random schedule: one step at a time, each applied and checked,
 *     rejected steps dropped (fuzz_build_schedule);
 *   - comparing a compiled run with the interpreter's results;
 *   - running numbered jobs in forked children with a time limit, so a
 *     crash or a hang becomes a report (fuzz_run_children).
 */
#ifndef RAVEL_TESTS_FUZZ_COMMON_H
#define RAVEL_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ravel.h"

/* ---- random numbers: splitmix64 ---- */

typedef struct Rng {
    uint64_t s;
} Rng;

uint64_t rng_next(Rng *r);
int rng_int(Rng *r, int n); /* uniform in [0, n) */
int rng_chance(Rng *r, int percent);

/* ---- small helpers ---- */

uint64_t fuzz_hash_str(const char *s);
const char *fuzz_base_name(const char *path);
void fuzz_die(const char *fmt, ...);
char *fuzz_read_text(const char *path);
int fuzz_is_ident_char(int c);
void fuzz_remove_dir(const char *dir); /* a flat directory and its files */

/* ---- stages and loops, from rv_module_schedule_info ---- */

#define MAX_NAME 64
#define MAX_LOOPS 32
#define MAX_STAGES 32

typedef struct Loop {
    char name[MAX_NAME];
    int reduce;
    rv_loop_kind kind;
    int row; /* another loop's extent depends on it (b, for l < len[b]) */
} Loop;

typedef struct StageInfo {
    char name[MAX_NAME];
    rv_stage_attach attach;
    char at[MAX_NAME]; /* RV_ATTACH_AT: the stage it is computed in */
    int nloops;
    Loop loops[MAX_LOOPS];
    rv_stage_kind kind;
    char source[MAX_NAME]; /* RV_STAGE_PART: the stage split ("" otherwise) */
    unsigned notes;        /* bit k: the stage has note k (rv_stage_note_kind) */
} StageInfo;

typedef struct Info {
    int nstages;
    StageInfo st[MAX_STAGES];
} Info;

/* The stages and loops of m's schedule (the first MAX_STAGES stages, the
 * first MAX_LOOPS loops of each); 0 with the last error set when a step
 * of it is illegal. */
int fuzz_schedule_info(rv_module *m, Info *info);

/* ---- programs and their size assignments ---- */

#define MAX_SIZES 8
#define MAX_TENSORS 32
#define MAX_POOL 16
#define MAX_READS 16

typedef struct Assign {
    int64_t val[MAX_SIZES];
    rv_bindings *ref;                 /* sizes, inputs, UFs and the interpreter's results */
    rv_array *owned[2 * MAX_TENSORS]; /* the input and UF arrays ref borrows */
    int nowned;
    double work;
    uint64_t seed; /* the data seed (fuzz_programs.c; fuzz_sched.c uses data_seed) */
    int drawn;     /* the sizes were drawn by rv_bindings_randomize, not set */
} Assign;

typedef struct Program {
    const char *path;
    char *text; /* without schedule blocks */
    rv_module *m;
    int nsizes;
    char size_name[MAX_SIZES][MAX_NAME];
    int64_t size_lo[MAX_SIZES], size_hi[MAX_SIZES];
    int ntensors;
    char tname[MAX_TENSORS][MAX_NAME];
    int is_input[MAX_TENSORS], is_output[MAX_TENSORS];
    int nreads[MAX_TENSORS];
    int reads[MAX_TENSORS][MAX_READS]; /* tensor indices each definition reads */
    double red_factor[MAX_TENSORS];    /* constant reduction extent, 0: one over sizes */
    Assign pool[MAX_POOL];
    int npool;
    uint64_t data_seed;
    int heavy; /* even the smallest assignment is over the work budget */
    /* counts */
    int passed, failed, rejected, applied, late_rejected;
} Program;

int fuzz_tensor_index(const Program *p, const char *name);
/* Sizes (with their ranges), tensors, what each definition reads and its
 * reduction extent, from p->text and p->m. */
void fuzz_scan_program(Program *p);
rv_array *fuzz_copy_array(const rv_array *a);
int fuzz_same_shape(const rv_array *a, const rv_array *b);
void fuzz_assign_free(Assign *a);
/* "N=3 M=0", each name preceded by `pre` ("--size " for a command line). */
void fuzz_format_sizes(const Program *p, const Assign *a, char *buf, size_t n, const char *pre);

/* ---- the random schedule ---- */

typedef struct Kept {
    char stage[MAX_NAME];
    char step[512];
} Kept;

/* The module of p->text with the kept steps applied (they were accepted). */
rv_module *fuzz_rebuild(const Program *p, const Kept *kept, int n);

/* Builds a random schedule of 1..max_steps steps for p, drawing from r:
 * each step is applied and the whole schedule checked; a rejected step
 * must fail with RV_ERR_SCHEDULE naming its primitive, and is dropped.
 * Returns the scheduled module (steps in *nkept, rejections counted in
 * *rejected), or NULL after printing "BUG: ..." when a step fails any
 * other way. With verbose, prints each try. */
rv_module *fuzz_build_schedule(Program *p, Rng *r, int max_steps, int verbose, int *nkept,
                               int *rejected);

/* ---- comparing with the interpreter ---- */

/* Compares one output (tools/cmd_compile.c's tolerance: f32 1e-4 and f64
 * 1e-10 relative to the magnitude, integers exact, plus 1e-4 absolute for
 * sums of f32); prints "NAME: MISMATCH ..." and returns 0 when they differ. */
int fuzz_compare(const char *name, const rv_array *got, const rv_array *want);

/* Runs prog on assignment a (its sizes, UFs and inputs) and compares every
 * output with the interpreter's in a->ref. Prints "RUN ERROR: ..." when the
 * compiled run fails. */
int fuzz_check_assign(const Program *p, rv_module *m, rv_program *prog, const Assign *a);

/* ---- numbered jobs in children ---- */

/* Runs run(ctx, i) for i in [0, n), each in a forked child with its stdout
 * and stderr captured and a time limit of timeout_s seconds (SIGALRM), up
 * to `jobs` at a time; the child's exit status is run's return value. As
 * each child ends, the parent calls done(ctx, i, status, output) with the
 * wait status and everything the child printed. */
void fuzz_run_children(long n, int jobs, unsigned timeout_s, int (*run)(void *ctx, long i),
                       void (*done)(void *ctx, long i, int status, const char *output), void *ctx);

#endif
