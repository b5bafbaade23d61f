/*
 * fuzz_parse.c — the front end and the printer under arbitrary bytes.
 *
 * One property, checked on every input (fuzz_parse_one):
 *
 *   - lexing, parsing and checking never crash, and either give a module
 *     or a located diagnostic ("NAME:LINE:COL: error: ...");
 *   - a module verifies (rv_module_verify) and its schedule checks
 *     (rv_module_check_schedule: accept or reject, never crash);
 *   - printing is a fixed point: print(m) parses back, and printing that
 *     module gives the same text.
 *
 * Two builds of this file:
 *
 *   - with -DRV_LIBFUZZER and clang -fsanitize=fuzzer,address,undefined
 *     (`make fuzz-parse`), libFuzzer calls LLVMFuzzerTestOneInput with
 *     mutated inputs, starting from tests/fuzz_parse/ and the programs of
 *     examples/, tests/error/ and tests/regress/;
 *   - otherwise (`make test`, any C compiler) main() replays the files named
 *     on the command line — the seed corpus, in which every input the
 *     fuzzer found a bug with is kept — and prints "fuzz-parse: N passed,
 *     N failed".
 *
 * A violated property aborts (libFuzzer saves the input) after printing
 * what differed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

/* Reports a violated property; returns false. */
static bool broken(const char *what, const char *detail, const char *a, const char *b) {
    fprintf(stderr, "fuzz-parse: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    if (a)
        fprintf(stderr, "--- first ---\n%s\n", a);
    if (b)
        fprintf(stderr, "--- second ---\n%s\n", b);
    return false;
}

/* Is msg a located diagnostic of file `name`? */
static bool located(const char *msg, const char *name) {
    size_t n = strlen(name);
    return strncmp(msg, name, n) == 0 && msg[n] == ':' && strstr(msg, ": error: ") != NULL;
}

/* Checks the property on data[0..size); true when it holds. */
static bool fuzz_parse_one(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return true;
    memcpy(text, data, size);
    text[size] = '\0';
    Module *m = NULL;
    rv_status st = lang_parse_text("in.rv", text, size, &m);
    free(text);
    if (st != RV_OK) {
        if (m)
            return broken("a failed parse returned a module", NULL, NULL, NULL);
        /* environment errors (out of memory) carry no location */
        if (st != RV_ERR_OOM && !located(rv_last_error(), "in.rv"))
            return broken("an error without a location", rv_last_error(), NULL, NULL);
        return true;
    }
    bool ok = true;
    if (rv_module_verify(m) != RV_OK)
        ok = broken("the checked module does not verify", rv_last_error(), NULL, NULL);
    rv_module_check_schedule(m); /* either answer is fine; it must return */
    char *first = rv_module_print(m);
    Module *again = NULL;
    if (ok && lang_parse_text("printed.rv", first, strlen(first), &again) != RV_OK) {
        ok = broken("the printed module does not parse", rv_last_error(), first, NULL);
    } else if (ok) {
        char *second = rv_module_print(again);
        if (strcmp(first, second) != 0)
            ok = broken("printing is not a fixed point", NULL, first, second);
        rv_free(second);
    }
    rv_module_free(again);
    rv_free(first);
    rv_module_free(m);
    return ok;
}

#ifdef RV_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fuzz_parse_one(data, size))
        abort();
    return 0;
}

#else

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        char *data;
        size_t len;
        if (base_read_file(argv[i], &data, &len) != RV_OK) {
            fprintf(stderr, "FAIL %s: %s\n", argv[i], rv_last_error());
            failed++;
            continue;
        }
        if (fuzz_parse_one((const uint8_t *)data, len)) {
            passed++;
        } else {
            fprintf(stderr, "FAIL %s\n", argv[i]);
            failed++;
        }
        base_free(data);
    }
    printf("fuzz-parse: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#endif
