/*
 * args.c — option parsing, argument binding and result files shared by the
 * subcommands that run programs (eval and run).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "interp/interp.h"
#include "tools.h"

/* Returns the value of `--opt VALUE` or `--opt=VALUE`, advancing *i. */
static const char *opt_value(const char *opt, int argc, char **argv, int *i) {
    size_t n = strlen(opt);
    if (strncmp(argv[*i], opt, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

/* Decimal numbers for options: digits only (with a leading '-' for a
 * signed one), no blanks, no '+', in range. strtoull alone would read
 * "-5" as 2^64 - 5 and skip leading blanks. */
static int parse_unsigned(const char *v, unsigned long long *out) {
    if (!isdigit((unsigned char)v[0]))
        return 0;
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return !errno && !*end;
}

static int parse_signed(const char *v, long long *out) {
    if (!isdigit((unsigned char)v[v[0] == '-']))
        return 0;
    char *end;
    errno = 0;
    *out = strtoll(v, &end, 10);
    return !errno && !*end;
}

/* The options of eval and run, and those of run only, for a "did you
 * mean" on an unknown one. */
static const char *const shared_options[] = {"--size",   "--input",  "--weights",
                                             "--random", "--output", "--save-inputs"};
static const char *const run_options[] = {"--check", "--target", "--time", "--repeat", "--threads"};

static void unknown_option(const char *cmd, const char *opt, bool run) {
    const char *cands[RV_COUNT(shared_options) + RV_COUNT(run_options)];
    int n = 0;
    for (int i = 0; i < RV_COUNT(shared_options); i++)
        cands[n++] = shared_options[i];
    for (int i = 0; run && i < RV_COUNT(run_options); i++)
        cands[n++] = run_options[i];
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(opt, "="), opt); /* --opt=VALUE */
    tool_unknown(cmd, "option", name, cands, n);
}

void tool_unknown(const char *cmd, const char *what, const char *name, const char *const *cands,
                  int n) {
    const char *near = base_near_name(name, cands, n);
    fprintf(stderr, "ravel %s: unknown %s '%s'", cmd, what, name);
    if (near)
        fprintf(stderr, "; did you mean '%s'?", near);
    fputc('\n', stderr);
}

/* run's own options; 1 when argv[*i] was one, -1 on a bad value. */
static int run_option(const char *cmd, int argc, char **argv, int *i, ToolArgs *a) {
    const char *v;
    unsigned long long n;
    if (strcmp(argv[*i], "--check") == 0) {
        a->check = 1;
    } else if (strcmp(argv[*i], "--time") == 0) {
        a->time = 1;
    } else if ((v = opt_value("--target", argc, argv, i))) {
        if (strcmp(v, "cpu") == 0) {
            a->target = RV_TARGET_CPU;
        } else if (strcmp(v, "cuda") == 0) {
            a->target = RV_TARGET_CUDA;
        } else {
            fprintf(stderr, "ravel %s: unknown target '%s' (cpu or cuda)\n", cmd, v);
            return -1;
        }
    } else if ((v = opt_value("--repeat", argc, argv, i))) {
        if (!parse_unsigned(v, &n) || n < 1 || n > 1000000) {
            fprintf(stderr, "ravel %s: --repeat expects a number of runs 1..1000000, got '%s'\n",
                    cmd, v);
            return -1;
        }
        a->repeat = (int)n;
        a->time = 1;
    } else if ((v = opt_value("--threads", argc, argv, i))) {
        if (!parse_unsigned(v, &n) || n > 4096) {
            fprintf(stderr,
                    "ravel %s: --threads expects 0..4096 (0: every CPU, 1: serial), got '%s'\n",
                    cmd, v);
            return -1;
        }
        a->threads = (int)n;
    } else {
        return 0;
    }
    return 1;
}

int tool_parse_args(const char *cmd, int argc, char **argv, ToolArgs *a) {
    memset(a, 0, sizeof *a);
    a->target = RV_TARGET_CPU;
    a->threads = -1;
    bool run = strcmp(cmd, "run") == 0;
    for (int i = 0; i < argc; i++) {
        int r = run && argv[i][0] == '-' ? run_option(cmd, argc, argv, &i, a) : 0;
        if (r < 0)
            return 0;
        if (r > 0)
            continue;
        const char *v;
        if (argv[i][0] != '-') {
            if (a->file) {
                fprintf(stderr, "ravel %s: more than one input file ('%s' and '%s')\n", cmd,
                        a->file, argv[i]);
                return 0;
            }
            a->file = argv[i];
        } else if ((v = opt_value("--size", argc, argv, &i))) {
            if (a->nsizes == 64 || !strchr(v, '=')) {
                fprintf(stderr, "ravel %s: --size expects NAME=VALUE, got '%s'\n", cmd, v);
                return 0;
            }
            a->sizes[a->nsizes++] = v;
        } else if ((v = opt_value("--input", argc, argv, &i))) {
            if (a->ninputs == 64 || !strchr(v, '=')) {
                fprintf(stderr, "ravel %s: --input expects NAME=FILE.npy, got '%s'\n", cmd, v);
                return 0;
            }
            a->inputs[a->ninputs++] = v;
        } else if ((v = opt_value("--weights", argc, argv, &i))) {
            if (a->nweights == (int)(sizeof a->weights / sizeof *a->weights)) {
                fprintf(stderr, "ravel %s: at most %d --weights files\n", cmd,
                        (int)(sizeof a->weights / sizeof *a->weights));
                return 0;
            }
            a->weights[a->nweights++] = v;
        } else if ((v = opt_value("--random", argc, argv, &i))) {
            if (!parse_unsigned(v, &a->seed)) {
                fprintf(stderr, "ravel %s: --random expects a non-negative integer seed, got '%s'\n",
                        cmd, v);
                return 0;
            }
            a->has_seed = 1;
        } else if ((v = opt_value("--output", argc, argv, &i))) {
            a->output = v;
        } else if (strcmp(argv[i], "--save-inputs") == 0) {
            a->save_inputs = 1;
        } else {
            unknown_option(cmd, argv[i], run);
            tool_command_help(stderr, cmd);
            return 0;
        }
    }
    if (!a->file) {
        fprintf(stderr, "ravel %s: no input file\n", cmd);
        tool_command_help(stderr, cmd);
        return 0;
    }
    return 1;
}

/* Does msg's first line already read "error: ..." or "LOCATION: error: ..."? */
static int is_diagnostic(const char *msg) {
    size_t first = strcspn(msg, "\n");
    if (strncmp(msg, "error: ", 7) == 0)
        return 1;
    const char *e = strstr(msg, ": error: ");
    return e && (size_t)(e - msg) < first;
}

void tool_print_error(const char *context) {
    const char *msg = rv_last_error();
    if (is_diagnostic(msg))
        fprintf(stderr, "%s\n", msg);
    else if (context)
        fprintf(stderr, "error: %s: %s\n", context, msg);
    else
        fprintf(stderr, "error: %s\n", msg);
}

/* Splits "NAME=VALUE" into a NUL-terminated name in buf and the value. */
static const char *split_eq(const char *s, char *buf, size_t n) {
    const char *eq = strchr(s, '=');
    size_t len = (size_t)(eq - s);
    if (len >= n)
        len = n - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return eq + 1;
}

/* "; did you mean 'N'?" for the size (sizes) or input / ufun nearest to
 * name, or "" (a static buffer: one message at a time). */
static const char *near_arg(rv_module *m, const char *name, bool sizes) {
    static char hint[300];
    Vec(const char *) cands = {0};
    for (int i = 0; sizes && i < rv_module_num_sizes(m); i++)
        vec_push(&cands, rv_size_name(rv_module_size_at(m, i)));
    for (int i = 0; !sizes && i < rv_module_num_ufuns(m); i++)
        vec_push(&cands, rv_ufun_name(rv_module_ufun_at(m, i)));
    for (int i = 0; !sizes && i < rv_module_num_tensors(m); i++)
        if (rv_tensor_is_input(rv_module_tensor_at(m, i)))
            vec_push(&cands, rv_tensor_name(rv_module_tensor_at(m, i)));
    const char *near = base_near_name(name, cands.data, cands.len);
    vec_free(&cands);
    snprintf(hint, sizeof hint, near ? "; did you mean '%s'?" : "", near);
    return hint;
}

int tool_bind(const ToolArgs *a, rv_module *m, rv_bindings *b) {
    char name[256];
    for (int i = 0; i < a->nsizes; i++) {
        const char *v = split_eq(a->sizes[i], name, sizeof name);
        long long x;
        if (!parse_signed(v, &x)) {
            fprintf(stderr, "error: --size %s: '%s' is not an integer\n", name, v);
            return 0;
        }
        if (!rv_module_size(m, name)) {
            fprintf(stderr, "error: --size %s: the program declares no size '%s'%s\n", name, name,
                        near_arg(m, name, true));
            return 0;
        }
        if (rv_bindings_set_size(b, name, x) != RV_OK) {
            tool_print_error(NULL);
            return 0;
        }
    }
    for (int i = 0; i < a->nweights; i++)
        if (rv_bindings_load_weights(b, a->weights[i]) != RV_OK) {
            fprintf(stderr, "error: --weights %s\n", rv_last_error());
            return 0;
        }
    for (int i = 0; i < a->ninputs; i++) {
        const char *path = split_eq(a->inputs[i], name, sizeof name);
        if (!rv_module_tensor(m, name) && !rv_module_ufun(m, name)) {
            fprintf(stderr, "error: --input %s: the program declares no input or ufun '%s'%s\n",
                    name, name, near_arg(m, name, false));
            return 0;
        }
        rv_array *arr;
        if (rv_npy_load(path, &arr) != RV_OK) {
            fprintf(stderr, "error: --input %s: %s\n", name, rv_last_error());
            return 0;
        }
        /* the bindings own it (a --weights array of the same name is replaced) */
        if (interp_bindings_adopt_array(b, name, arr) != RV_OK) {
            rv_array_free(arr);
            tool_print_error(NULL);
            return 0;
        }
    }
    /* X : f32[16*T, 768] bound to a 48 x 768 array says T = 3 */
    if (rv_bindings_infer_sizes(b) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    if (a->has_seed && rv_bindings_randomize(b, a->seed) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    return 1;
}

static void print_shape(FILE *f, const rv_array *a) {
    fprintf(f, "%s[", rv_dtype_name(rv_array_dtype(a)));
    for (int i = 0; i < rv_array_ndim(a); i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)rv_array_shape(a)[i]);
    fprintf(f, "]");
}

/* Writes `name`'s array to DIR/name.npy and reports it. */
static int save(const char *dir, const char *name, const rv_array *a) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (rv_npy_save(path, a) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    printf("%s: ", name);
    print_shape(stdout, a);
    printf(" -> %s\n", path);
    return 1;
}

int tool_write_results(const ToolArgs *a, rv_module *m, const rv_bindings *b) {
    if (a->output && mkdir(a->output, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "error: cannot create %s: %s\n", a->output, strerror(errno));
        return 0;
    }
    for (int i = 0; a->save_inputs && a->output && i < rv_module_num_ufuns(m); i++) {
        const char *name = rv_ufun_name(rv_module_ufun_at(m, i));
        const rv_array *arr = rv_bindings_get_array(b, name);
        if (arr && !save(a->output, name, arr))
            return 0;
    }
    for (int i = 0; i < rv_module_num_tensors(m); i++) {
        rv_tensor *t = rv_module_tensor_at(m, i);
        const char *name = rv_tensor_name(t);
        if (!rv_tensor_is_output(m, t) && !(a->save_inputs && rv_tensor_is_input(t)))
            continue;
        const rv_array *arr = rv_bindings_get_array(b, name);
        if (!arr)
            continue;
        if (a->output) {
            if (!save(a->output, name, arr))
                return 0;
        } else {
            printf("%s: ", name);
            print_shape(stdout, arr);
            printf("\n");
        }
    }
    return 1;
}
