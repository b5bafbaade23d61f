/*
 * cmd_build.c — `ravel build FILE.rv -o NAME [--shared] [--target c]`:
 * ahead-of-time compilation.
 *
 * Writes NAME.c and NAME.h (src/codegen/c_aot.c: the kernels `ravel emit`
 * shows, renamed NAME_kernel_X, plus NAME_run and friends, documented at
 * the top of NAME.h) and copies ravel_rt.h next to them, so the directory
 * compiles on its own: `cc -c NAME.c` needs no -I and no ravel library.
 * --shared also compiles libNAME.so with the system C compiler ($RAVEL_CC,
 * else cc) and the JIT's flags (src/jit/jit.c), so the library is as fast
 * as what `ravel run` loads (and, with -march=native, as unportable).
 *
 * NAME may carry a directory (out/model -> out/model.c, out/libmodel.so);
 * the directory must exist. Its last component, made a C identifier, is
 * the prefix of every exported symbol.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "jit/jit.h"
#include "tools.h"

/* The JIT's default flags (jit.c), less -shared, which the call adds, and
 * the compiler's own (jit_compiler_flags). */
static const char *const aot_cflags[] = {
    "-O3",           "-march=native", "-std=c11", "-fPIC", "-ffp-contract=fast", "-fno-math-errno",
    "-fopenmp-simd",
};

typedef struct BuildArgs {
    const char *file;
    const char *out;
    const char *target;
    int shared;
} BuildArgs;

static int parse(int argc, char **argv, BuildArgs *a) {
    memset(a, 0, sizeof *a);
    a->target = "c";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "ravel build: %s needs a NAME\n", argv[i]);
                return 0;
            }
            a->out = argv[++i];
        } else if (strcmp(argv[i], "--shared") == 0) {
            a->shared = 1;
        } else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
            a->target = argv[++i];
        } else if (strncmp(argv[i], "--target=", 9) == 0) {
            a->target = argv[i] + 9;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "ravel build: unknown option '%s'\n", argv[i]);
            return 0;
        } else if (a->file) {
            fprintf(stderr, "ravel build: more than one input file ('%s' and '%s')\n", a->file,
                    argv[i]);
            return 0;
        } else {
            a->file = argv[i];
        }
    }
    if (!a->file || !a->out || !*a->out) {
        fprintf(stderr, "ravel build: %s\n", !a->file ? "no input file" : "no -o NAME");
        return 0;
    }
    size_t n = strlen(a->out);
    if (a->out[n - 1] == '/' || strcmp(a->out + (n > 1 ? n - 2 : 0), "/.") == 0 ||
        strcmp(a->out, ".") == 0) {
        fprintf(stderr, "ravel build: -o %s names a directory; give DIR/NAME\n", a->out);
        return 0;
    }
    if (strcmp(a->target, "c") != 0) {
        fprintf(stderr, "ravel build: unknown target '%s' (only 'c' today)\n", a->target);
        return 0;
    }
    return 1;
}

/* Splits out "dir/name[.c]" into dir ("." if none) and a C identifier. */
static void split_out(const char *out, Buf *dir, Buf *name) {
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    if (slash)
        buf_printf(dir, "%.*s", (int)(slash == out ? 1 : slash - out), out);
    else
        buf_puts(dir, ".");
    size_t n = strlen(base);
    if (n > 2 && strcmp(base + n - 2, ".c") == 0)
        n -= 2;
    if (n == 0 || isdigit((unsigned char)base[0]))
        buf_putc(name, 'm');
    for (size_t i = 0; i < n; i++)
        buf_putc(name, isalnum((unsigned char)base[i]) ? base[i] : '_');
}

static int write_bytes(const char *dir, const char *file, const char *data, size_t len) {
    Buf p = {0};
    buf_printf(&p, "%s/%s", dir, file);
    rv_status st = base_write_file(buf_str(&p), data, len);
    if (st != RV_OK)
        tool_print_error(NULL);
    buf_free(&p);
    return st == RV_OK;
}

static int write_text(const char *dir, const char *file, const char *text) {
    return write_bytes(dir, file, text, strlen(text));
}

/* Writes ravel_rt.h to dir: the header embedded in the library (the one
 * the generated code was made for), or $RAVEL_INCLUDE_DIR's when a
 * developer overrides it, as the JIT does. */
static int copy_rt_header(const char *dir) {
    const char *inc = jit_include_override();
    if (!inc) {
        size_t len;
        const char *hdr = jit_rt_header(&len);
        return write_bytes(dir, "ravel_rt.h", hdr, len);
    }
    Buf p = {0};
    buf_printf(&p, "%s/ravel_rt.h", inc);
    char *text = NULL;
    size_t len = 0;
    rv_status st = base_read_file(buf_str(&p), &text, &len);
    buf_free(&p);
    if (st != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    int ok = write_bytes(dir, "ravel_rt.h", text, len);
    base_free(text);
    return ok;
}

/* cc <flags> -shared -I dir -o dir/libNAME.so dir/NAME.c -lm */
static int compile_shared(const char *dir, const char *name) {
    const char *cc = getenv("RAVEL_CC");
    if (!cc || !*cc)
        cc = "cc";
    Arena *ar = arena_new();
    Vec(char *) argv = {0};
    for (const char *s = cc; *s;) {
        s += strspn(s, " \t");
        size_t n = strcspn(s, " \t");
        if (n)
            vec_push(&argv, arena_strndup(ar, s, n));
        s += n;
    }
    for (int i = 0; i < RV_COUNT(aot_cflags); i++)
        vec_push(&argv, arena_strdup(ar, aot_cflags[i]));
    const char *more[4];
    int nmore = jit_compiler_flags(cc, more, RV_COUNT(more));
    for (int i = 0; i < nmore; i++)
        vec_push(&argv, arena_strdup(ar, more[i]));
    vec_push(&argv, arena_strdup(ar, "-shared"));
    vec_push(&argv, arena_printf(ar, "-I%s", dir));
    vec_push(&argv, arena_strdup(ar, "-o"));
    char *so = arena_printf(ar, "%s/lib%s.so", dir, name);
    vec_push(&argv, so);
    vec_push(&argv, arena_printf(ar, "%s/%s.c", dir, name));
    vec_push(&argv, arena_strdup(ar, "-lm"));
    vec_push(&argv, NULL);
    char *log = NULL;
    int code = 0;
    int ok = jit_run(argv.data, &log, &code) == RV_OK && code == 0;
    if (!ok) {
        char *cmd = jit_argv_string(argv.data);
        if (log)
            fprintf(stderr, "error: the C compiler failed (exit status %d): %s\n%s", code, cmd,
                    log);
        else
            fprintf(stderr, "error: cannot run the C compiler: %s: %s\n", cmd, rv_last_error());
        base_free(cmd);
    } else {
        printf("wrote %s\n", so);
    }
    base_free(log);
    vec_free(&argv);
    arena_free(ar);
    return ok;
}

int cmd_build(int argc, char **argv) {
    BuildArgs a;
    if (!parse(argc, argv, &a)) {
        tool_command_help(stderr, "build");
        return 2;
    }
    rv_module *m;
    if (rv_module_load(a.file, &m) != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    Buf dir = {0}, name = {0};
    split_out(a.out, &dir, &name);
    const char *src_name = strrchr(a.file, '/') ? strrchr(a.file, '/') + 1 : a.file;
    Kernel **ks = NULL;
    int n = 0;
    CgUnit unit = {0};
    CgAot aot = {0};
    int ok = 0;
    rv_status st = ir_verify(m);
    if (st == RV_OK)
        st = lower_pipeline(m, &ks, &n);
    if (st == RV_OK) {
        cg_c_module(ks, n, &unit);
        st = cg_c_aot(m, ks, n, &unit, buf_str(&name), src_name, &aot);
    }
    if (st != RV_OK) {
        tool_print_error(NULL);
    } else {
        Buf cfile = {0}, hfile = {0};
        buf_printf(&cfile, "%s.c", buf_str(&name));
        buf_printf(&hfile, "%s.h", buf_str(&name));
        ok = write_text(buf_str(&dir), buf_str(&cfile), aot.source) &&
             write_text(buf_str(&dir), buf_str(&hfile), aot.header) &&
             copy_rt_header(buf_str(&dir));
        if (ok)
            printf("wrote %s/%s, %s/%s, %s/ravel_rt.h\n", buf_str(&dir), buf_str(&cfile),
                   buf_str(&dir), buf_str(&hfile), buf_str(&dir));
        buf_free(&cfile);
        buf_free(&hfile);
        if (ok && a.shared)
            ok = compile_shared(buf_str(&dir), buf_str(&name));
    }
    cg_aot_free(&aot);
    cg_unit_free(&unit);
    base_free(ks);
    buf_free(&dir);
    buf_free(&name);
    rv_module_free(m);
    return ok ? 0 : 1;
}
