/*
 * cmd_ir.c — the subcommands that work on a program's IR without compiling
 * it: check (parse + check), print (the IR as source) and eval (the
 * reference interpreter).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "tools.h"

/* Loads FILE.rv, printing the diagnostic on failure. */
static rv_module *load(const char *path) {
    rv_module *m;
    if (rv_module_load(path, &m) != RV_OK) {
        tool_print_error(NULL);
        return NULL;
    }
    return m;
}

int cmd_check(int argc, char **argv) {
    if (argc != 1 || argv[0][0] == '-') {
        tool_command_help(stderr, "check");
        return 2;
    }
    rv_module *m = load(argv[0]);
    if (!m)
        return 1;
    rv_status st = rv_module_verify(m);
    if (st != RV_OK)
        fprintf(stderr, "%s: internal error: %s\n", argv[0], rv_last_error());
    else if ((st = rv_module_check_schedule(m)) != RV_OK)
        tool_print_error(NULL);
    rv_module_free(m);
    return st == RV_OK ? 0 : 1;
}

int cmd_print(int argc, char **argv) {
    if (argc != 1 || argv[0][0] == '-') {
        tool_command_help(stderr, "print");
        return 2;
    }
    rv_module *m = load(argv[0]);
    if (!m)
        return 1;
    char *text = rv_module_print(m);
    fputs(text, stdout);
    rv_free(text);
    rv_module_free(m);
    return 0;
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

int cmd_eval(int argc, char **argv) {
    ToolArgs a;
    if (!tool_parse_args("eval", argc, argv, &a))
        return 2;
    rv_module *m = load(a.file);
    if (!m)
        return 1;
    rv_bindings *b = rv_bindings_new(m);
    int ok = tool_bind(&a, m, b);
    if (ok && rv_interp_run(m, b) != RV_OK) {
        tool_print_error(NULL);
        ok = 0;
    }
    if (ok && a.output && mkdir(a.output, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "error: cannot create %s: %s\n", a.output, strerror(errno));
        ok = 0;
    }
    /* the sizes the run used, given or drawn, so a run can be repeated */
    for (int i = 0; ok && i < rv_module_num_sizes(m); i++) {
        const char *name = rv_size_name(rv_module_size_at(m, i));
        printf("%s = %lld\n", name, (long long)rv_bindings_get_size(b, name));
    }
    for (int i = 0; ok && a.save_inputs && a.output && i < rv_module_num_ufuns(m); i++) {
        const char *name = rv_ufun_name(rv_module_ufun_at(m, i));
        const rv_array *arr = rv_bindings_get_array(b, name);
        if (arr)
            ok = save(a.output, name, arr);
    }
    for (int i = 0; ok && i < rv_module_num_tensors(m); i++) {
        rv_tensor *t = rv_module_tensor_at(m, i);
        const char *name = rv_tensor_name(t);
        int is_out = rv_tensor_is_output(m, t);
        if (!is_out && !(a.save_inputs && rv_tensor_is_input(t)))
            continue;
        const rv_array *arr = rv_bindings_get_array(b, name);
        if (!arr)
            continue;
        if (a.output) {
            ok = save(a.output, name, arr);
        } else {
            printf("%s: ", name);
            print_shape(stdout, arr);
            printf("\n");
        }
    }
    rv_bindings_free(b);
    rv_module_free(m);
    return ok ? 0 : 1;
}
