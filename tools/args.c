/*
 * args.c — option parsing and argument binding shared by the subcommands
 * that run programs (eval now; run, bench later).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int tool_parse_args(const char *cmd, int argc, char **argv, ToolArgs *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < argc; i++) {
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
            fprintf(stderr, "ravel %s: unknown option '%s'\n", cmd, argv[i]);
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
            fprintf(stderr, "error: --size %s: the program declares no size '%s'\n", name, name);
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
            fprintf(stderr, "error: --input %s: the program declares no input or ufun '%s'\n",
                    name, name);
            return 0;
        }
        rv_array *arr;
        if (rv_npy_load(path, &arr) != RV_OK) {
            fprintf(stderr, "error: --input %s: %s\n", name, rv_last_error());
            return 0;
        }
        /* the bindings borrow arrays; these live until the process exits */
        if (rv_bindings_set_array(b, name, arr) != RV_OK) {
            tool_print_error(NULL);
            return 0;
        }
    }
    if (a->has_seed && rv_bindings_randomize(b, a->seed) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    return 1;
}
