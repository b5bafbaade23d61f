/*
 * cmd_ir.c — the subcommands that work on a program's IR without compiling
 * it: check (parse + check), print (the IR as source) and eval (the
 * reference interpreter).
 */
#include <string.h>

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
    /* the sizes the run used, given or drawn, so a run can be repeated */
    for (int i = 0; ok && i < rv_module_num_sizes(m); i++) {
        const char *name = rv_size_name(rv_module_size_at(m, i));
        printf("%s = %lld\n", name, (long long)rv_bindings_get_size(b, name));
    }
    if (ok)
        ok = tool_write_results(&a, m, b);
    rv_bindings_free(b);
    rv_module_free(m);
    return ok ? 0 : 1;
}
