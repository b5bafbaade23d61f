/*
 * tools.h — the subcommands of the `ravel` command line.
 * Each takes the arguments after its name and returns the exit status.
 */
#ifndef RAVEL_TOOLS_H
#define RAVEL_TOOLS_H

#include <stdio.h>

#include "ravel.h"

typedef struct ToolCommand {
    const char *name;
    const char *summary;
    const char *usage;
    int (*run)(int argc, char **argv);
} ToolCommand;

/* main.c */
void tool_command_help(FILE *f, const char *name);

/* cmd_ir.c */
int cmd_check(int argc, char **argv);
int cmd_print(int argc, char **argv);
int cmd_eval(int argc, char **argv);

/* cmd_compile.c */
int cmd_emit(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* cmd_build.c */
int cmd_build(int argc, char **argv);

/* cmd_bench.c */
int cmd_bench(int argc, char **argv);

/* args.c: parsing shared by the commands */
typedef struct ToolArgs {
    const char *file;
    const char *sizes[64];
    int nsizes; /* NAME=V */
    const char *inputs[64];
    int ninputs; /* NAME=FILE.npy */
    const char *weights[8];
    int nweights; /* safetensors or .npz files */
    int has_seed;
    unsigned long long seed;
    const char *output; /* --output DIR: results as DIR/NAME.npy */
    int save_inputs;
    /* run only */
    int check;        /* --check: compare with the interpreter */
    rv_target target; /* --target cpu|cuda */
    int time;         /* --time or --repeat: time the runs */
    int repeat;       /* --repeat N: timed runs (0: the default) */
    int threads;      /* --threads N; -1: not given */
} ToolArgs;
/* Parses the options of `cmd`; prints a usage error and returns 0 on failure. */
int tool_parse_args(const char *cmd, int argc, char **argv, ToolArgs *a);
/* Binds --size, --weights and --input values (and --random draws) into b;
 * an --input overrides a tensor of the same name in a --weights file. */
int tool_bind(const ToolArgs *a, rv_module *m, rv_bindings *b);
/* Prints "ravel CMD: unknown WHAT 'NAME'", with a "did you mean" among
 * cands when one is near. */
void tool_unknown(const char *cmd, const char *what, const char *name, const char *const *cands,
                  int n);
/* With --output DIR: writes every output (and with --save-inputs the
 * inputs and UF arrays) to DIR/NAME.npy, creating DIR, and says so;
 * without, prints each output's dtype and shape. */
int tool_write_results(const ToolArgs *a, rv_module *m, const rv_bindings *b);
/* Prints the last error on stderr as "error: CONTEXT: MESSAGE" (CONTEXT may
 * be NULL), or as it is when it is already a diagnostic that says
 * "error:" itself ("f.rv:3:5: error: ..."). */
void tool_print_error(const char *context);

#endif
