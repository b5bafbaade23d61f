/*
 * main.c — the `ravel` command line: dispatches to one function per
 * subcommand (tools/tools.h) and prints help.
 *
 * Exit status: 0 on success, 1 when the input is wrong (a diagnostic was
 * printed), 2 on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "sched/sched.h"
#include "tools.h"

static const ToolCommand commands[] = {
    {"check", "parse and check a .rv file", "ravel check FILE.rv", cmd_check},
    {"print", "print a .rv file's IR as ravel source (round-trips)", "ravel print FILE.rv",
     cmd_print},
    {"eval", "run the reference interpreter",
     "ravel eval FILE.rv [--size NAME=V]... [--input NAME=FILE.npy]... [--random SEED]\n"
     "           [--weights FILE.safetensors|FILE.npz]... [--output DIR] [--save-inputs]",
     cmd_eval},
    {"emit", "print the C code generated for a .rv file",
     "ravel emit FILE.rv [--target c|cuda|lower]\n\n"
     "--target cuda prints each kernel's CUDA C (its launch in the first comment);\n"
     "--target lower the loop IR after the lowering pipeline.",
     cmd_emit},
    {"run", "compile and run; --check compares every output with the interpreter",
     "ravel run FILE.rv [--size NAME=V]... [--input NAME=FILE.npy]... [--random SEED] [--check]\n"
     "          [--weights FILE.safetensors|FILE.npz]... [--output DIR] [--save-inputs]\n"
     "          [--time] [--repeat N] [--threads N] [--target cpu|cuda]\n\n"
     "Sizes that the shapes of --input (and --weights) arrays determine need no\n"
     "--size: X : f32[16*T, 768] given a 48 x 768 array sets T = 3.\n"
     "--output DIR writes each output to DIR/NAME.npy (with --save-inputs also\n"
     "the inputs and UF arrays), as eval does. --random draws floats uniform in\n"
     "[-1, 1); in a program with a recursion group each input is divided by the\n"
     "square root of its fan-in (the extents its reads are reduced over), as\n"
     "weights are initialized, so deep structures stay bounded. --time runs the compiled program\n"
     "10 more times after the first (--repeat N: N times) and prints one line:\n"
     "the compile time, then the median, min and max of the runs in ms.\n"
     "--threads N: the threads of parallel loops (0 or absent: $RAVEL_NUM_THREADS,\n"
     "else every CPU; 1: serial).",
     cmd_run},
    {"build", "compile ahead of time to a standalone C library (NAME.c, NAME.h)",
     "ravel build FILE.rv -o NAME [--shared] [--march CPU] [--threads N] [--target c]\n"
     "            [--variant FILE]...\n"
     "            [--dispatch SIZE=LO..HI[,SIZE=LO..HI]:V | --dispatch extern]...\n"
     "            [--records FILE]\n\n"
     "Writes NAME.c and NAME.h, and copies ravel_rt.h next to them: the kernels\n"
     "of `ravel emit` plus NAME_run(&args, ctx), which runs them on plain C arrays\n"
     "(the API is documented at the top of NAME.h; NAME_fields and\n"
     "NAME_field_infos describe the arguments, NAME_last_error() why a run failed).\n"
     "They need only libc and libm. --threads N embeds ravel's thread pool, so\n"
     "NAME_run(&args, NULL) runs parallel loops on N threads (0: every CPU;\n"
     "NAME_set_num_threads changes it; needs -pthread); the default, 1, is serial.\n"
     "--shared also compiles libNAME.so with $RAVEL_CC (default cc) and the JIT's\n"
     "flags (-O3 ...) for the compiler's default, portable target CPU, or for\n"
     "--march CPU (native, x86-64-v3, ...: -march=CPU; native only runs on CPUs\n"
     "like this one). NAME may have a directory part, which must exist.\n"
     "Each --variant FILE (schedule blocks) is one variant of the kernels, in place\n"
     "of the file's own schedule; NAME_run picks one per call by the --dispatch\n"
     "rules (the first whose sizes lie in their ranges; else variant 0), or by\n"
     "NAME_dispatch(sizes, NULL) of yours with --dispatch extern.\n"
     "--records FILE builds what `ravel tune FILE.rv --records FILE` found, without\n"
     "measuring: the recorded kernels as variants, chosen by the tuner's decision\n"
     "tree (NAME_dispatch).",
     cmd_build},
    {"bench", "run a benchmark driver of bench/ (ravel bench list)",
     "ravel bench NAME [ARGS...]\n\n"
     "Runs the driver built by `make bench-build` (dense, bmm, sgemm, peak) with\n"
     "ARGS, so the output is the driver's JSON lines. `ravel bench list` shows the\n"
     "benchmarks and where their drivers are. RAVEL_BENCH_DIR overrides where\n"
     "the drivers are looked for. `torch` and `trees` run Python scripts of the\n"
     "source tree's bench/; `trees` (the recursive models against DyNet and\n"
     "PyTorch, bench/trees/bench.py) needs the venv of `sh bench/trees/setup.sh`.",
     cmd_bench},
    {"tune", "auto-schedule a program's contraction for every shape of its size range",
     "ravel tune FILE.rv [--trials N] [--shapes FILE] [--records FILE] [-o OUT]\n"
     "           [--batch N] [--variants N] [--threads N] [--seed S] [--timeout S]\n"
     "           [--plot FILE.png] [--quiet] [--hw] [--shapes-only] [--specialize N]\n"
     "           [--verify N]\n\n"
     "Searches micro-kernel schedules of the program's contraction (dense, batch_matmul)\n"
     "jointly for every shape of its size range (DietCode): N measurements in all\n"
     "(default 64), chosen by a cost model learned with XGBoost. --shapes FILE gives\n"
     "the shapes and their frequencies (one per line: the size values, then an\n"
     "optional weight; for packed rows, their sum in the outer size's place; for a\n"
     "recursion's member, nodes per level in B's) and --shapes-only tunes them\n"
     "alone. Ragged rows (Y[b, l < len[b], j]) are tuned fused and dispatched on\n"
     "sum(len); a recursion's member on nodes per level. --records FILE keeps every\n"
     "measurement (JSON lines) and resumes from it. -o OUT writes OUT.rv (the tuned\n"
     "program), OUT.vN.sched (each variant) and OUT_dispatch.c (the decision tree).\n"
     "Candidates run in a child\n"
     "process: one that crashes, or gives no result in --timeout S seconds (60), is\n"
     "recorded failed and the search goes on. --plot FILE.png draws best GFLOP/s vs\n"
     "trials per shape with gnuplot. --hw prints the machine's facts. --specialize N\n"
     "(default 16, 0: none) measures the kernels of up to N small frequent shapes\n"
     "compiled for that shape alone, its sizes constants, and dispatches a shape to\n"
     "such a specialized leaf, exactly there, where it is faster. --verify N (default\n"
     "half the trials, 0: none) measures, past the trials, the kernel the dispatcher\n"
     "gives each shape where it was never measured there (and the best predicted\n"
     "there) and redoes the votes, a measured time first.",
     cmd_tune},
};

static void usage(FILE *f) {
    fprintf(f, "ravel — a compiler and runtime for dynamic neural networks\n\n"
               "usage: ravel COMMAND [ARGS]\n\ncommands:\n");
    for (int i = 0; i < (int)(sizeof commands / sizeof commands[0]); i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'ravel help COMMAND' or 'ravel COMMAND --help' describes one command;\n"
               "'ravel help schedules' lists the schedule primitives;\n"
               "'ravel --version' prints the version.\n");
}

/* `ravel help schedules`: made from the table of primitives (prims.def). */
static void schedules_help(FILE *f) {
    Buf b = {0};
    sched_prims_help(&b);
    fputs(buf_str(&b), f);
    buf_free(&b);
}

static const ToolCommand *find(const char *name) {
    for (int i = 0; i < RV_COUNT(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

void tool_command_help(FILE *f, const char *name) {
    const ToolCommand *c = find(name);
    if (c)
        fprintf(f, "usage: %s\n\n%s\n", c->usage, c->summary);
}

/* "ravel: unknown command 'X'", with a did-you-mean, then the usage. */
static void unknown_command(const char *name) {
    const char *names[RV_COUNT(commands)];
    for (int i = 0; i < RV_COUNT(commands); i++)
        names[i] = commands[i].name;
    const char *near = base_near_name(name, names, RV_COUNT(commands));
    if (near)
        fprintf(stderr, "ravel: unknown command '%s'; did you mean '%s'?\n\n", name, near);
    else
        fprintf(stderr, "ravel: unknown command '%s'\n\n", name);
    usage(stderr);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ravel %s\n", rv_version());
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) {
        if (argc > 2 && strcmp(argv[2], "schedules") == 0) {
            schedules_help(stdout);
            return 0;
        }
        if (argc > 2 && find(argv[2])) {
            tool_command_help(stdout, argv[2]);
            return 0;
        }
        if (argc > 2) {
            unknown_command(argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    const ToolCommand *c = find(argv[1]);
    if (!c) {
        unknown_command(argv[1]);
        return 2;
    }
    /* bench passes its arguments to a driver, which has its own --help */
    int last = c->run == cmd_bench ? (argc < 3 ? argc : 3) : argc;
    for (int i = 2; i < last; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            tool_command_help(stdout, c->name);
            return 0;
        }
    return c->run(argc - 2, argv + 2);
}
