/* test_tune_records.c — tuning records (src/tune/records.c): JSON lines
 * written by appends and read back, lookup by (program, shape, trace), a
 * torn last line skipped with a warning and cut by the next append, and
 * corrupt lines as errors naming the line. */
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tune/tune.h"

static char dir[] = "/tmp/ravel_test_records_XXXXXX";

static const char *tmp_path(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    return path;
}

static void write_text(const char *path, const char *text) {
    CHECK_EQ_INT(base_write_file(path, text, strlen(text)), RV_OK);
}

static void append_text(const char *path, const char *text) {
    FILE *f = fopen(path, "a");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char *names_tk[] = {"T", "K"};

static TuneRecord record(int64_t t, const char *trace, double seconds, TuneStatus st) {
    static int64_t values[64][2];
    static int next;
    int64_t *v = values[next++ % 64];
    v[0] = t;
    v[1] = 768;
    return (TuneRecord){.program = "3fa9c0de12345678",
                        .machine = "x86_64 AVX-512 L1d 48 KiB",
                        .trace = trace,
                        .nsizes = 2,
                        .size_names = names_tk,
                        .size_values = v,
                        .seconds = seconds,
                        .status = st};
}

static const char *trace_a = "split i 4 -> io ii\nvectorize ii  # \"quoted\", tab\t";
static const char *trace_b = "parallel i";

static void test_round_trip(void) {
    const char *path = tmp_path("round.jsonl");
    TuneRecord rs_in[] = {
        record(1, trace_a, 1.5e-5, TUNE_STATUS_OK), record(16, trace_a, 2.25e-4, TUNE_STATUS_OK),
        record(16, trace_b, 0, TUNE_STATUS_WRONG), record(128, trace_b, 0, TUNE_STATUS_FAILED)};
    for (int i = 0; i < RV_COUNT(rs_in); i++)
        CHECK_EQ_INT(tune_record_append(path, &rs_in[i]), RV_OK);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 4);
    CHECK_STR_CONTAINS(buf_str(&rs.warnings), "");
    CHECK_EQ_INT(rs.warnings.len, 0);
    /* The shape in the other order finds the same record. */
    const char *names_kt[] = {"K", "T"};
    int64_t kt[] = {768, 16};
    const TuneRecord *r = tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, trace_a);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ_INT(r->line, 2);
        CHECK(strcmp(r->trace, trace_a) == 0);
        CHECK(strcmp(r->machine, "x86_64 AVX-512 L1d 48 KiB") == 0);
        CHECK(r->seconds == 2.25e-4);
        CHECK_EQ_INT(r->status, TUNE_STATUS_OK);
        CHECK_EQ_INT(r->nsizes, 2);
        CHECK(strcmp(r->size_names[0], "K") == 0 && r->size_values[0] == 768);
        CHECK(strcmp(r->size_names[1], "T") == 0 && r->size_values[1] == 16);
    }
    r = tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, trace_b);
    CHECK(r && r->status == TUNE_STATUS_WRONG && r->line == 3);
    /* Not measured: another trace, shape or program. */
    int64_t kt2[] = {768, 17};
    CHECK(tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt2, 2, trace_a) == NULL);
    CHECK(tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, "split i 8") == NULL);
    CHECK(tune_records_find(&rs, "0000", 0, names_kt, kt, 2, trace_a) == NULL);
    CHECK(tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 1, trace_a) == NULL);
    tune_records_free(&rs);

    /* A later measurement of the same candidate is the one found. */
    TuneRecord again = record(16, trace_a, 2.0e-4, TUNE_STATUS_OK);
    CHECK_EQ_INT(tune_record_append(path, &again), RV_OK);
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    r = tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, trace_a);
    CHECK(r && r->line == 5 && r->seconds == 2.0e-4);
    tune_records_free(&rs);
}

static void test_one_line_format(void) {
    TuneRecord r = record(4, "a\nb", 0.5, TUNE_STATUS_OK);
    char *s = tune_record_to_json(&r);
    CHECK(strchr(s, '\n') == NULL);
    CHECK_STR_CONTAINS(s, "\"shape\":{\"T\":4,\"K\":768}");
    CHECK_STR_CONTAINS(s, "\"trace\":\"a\\nb\"");
    CHECK_STR_CONTAINS(s, "\"status\":\"ok\"");
    base_free(s);
}

static void test_missing_file(void) {
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(tmp_path("none.jsonl"), &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 0);
    tune_records_free(&rs);
}

/* A crash mid-write leaves a torn last line: skipped with a warning, then
 * cut off by the next append, which leaves a clean file. */
static void test_torn_last_line(void) {
    const char *path = tmp_path("torn.jsonl");
    TuneRecord a = record(1, trace_a, 1e-5, TUNE_STATUS_OK),
               b = record(2, trace_a, 2e-5, TUNE_STATUS_OK);
    CHECK_EQ_INT(tune_record_append(path, &a), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &b), RV_OK);
    append_text(path, "{\"version\":1,\"program\":\"3fa9c0de1234");
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 2);
    CHECK_STR_CONTAINS(buf_str(&rs.warnings), "torn.jsonl:3: skipped a torn last line");
    tune_records_free(&rs);

    TuneRecord c = record(3, trace_a, 3e-5, TUNE_STATUS_OK);
    CHECK_EQ_INT(tune_record_append(path, &c), RV_OK);
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 3);
    CHECK_EQ_INT(rs.warnings.len, 0);
    if (rs.len == 3)
        CHECK(rs.data[2].line == 3 && rs.data[2].size_values[1] == 3);
    tune_records_free(&rs);

    /* A whole record without its newline (written by hand) is kept. */
    const char *p2 = tmp_path("nonl.jsonl");
    char *line = tune_record_to_json(&a);
    write_text(p2, line);
    base_free(line);
    CHECK_EQ_INT(tune_record_append(p2, &b), RV_OK);
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(p2, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 2);
    CHECK_EQ_INT(rs.warnings.len, 0);
    tune_records_free(&rs);
}

/* Tuners appending to one file at once: every record arrives whole. */
static void test_concurrent_appends(void) {
    enum { WRITERS = 4, EACH = 50 };
    const char *path = tmp_path("shared.jsonl");
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            int bad = 0;
            for (int i = 0; i < EACH; i++) {
                TuneRecord r = record(w * EACH + i, trace_a, 1e-6 * i, TUNE_STATUS_OK);
                bad += tune_record_append(path, &r) != RV_OK;
            }
            _exit(bad != 0);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int status = 1;
        CHECK(pids[w] > 0 && waitpid(pids[w], &status, 0) == pids[w]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, WRITERS * EACH);
    CHECK_EQ_INT(rs.warnings.len, 0);
    int64_t kt[] = {768, 0};
    const char *names_kt[] = {"K", "T"};
    int found = 0;
    for (int i = 0; i < WRITERS * EACH; i++) {
        kt[1] = i;
        found += tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, trace_a) != NULL;
    }
    CHECK_EQ_INT(found, WRITERS * EACH);
    tune_records_free(&rs);
}

/* Every corrupt line other than a torn last one is an error naming it. */
static void expect_corrupt(const char *line2, const char *message) {
    const char *path = tmp_path("bad.jsonl");
    TuneRecord a = record(1, trace_a, 1e-5, TUNE_STATUS_OK);
    CHECK_EQ_INT(tune_record_append(path, &a), RV_OK);
    append_text(path, line2);
    append_text(path, "\n");
    CHECK_EQ_INT(tune_record_append(path, &a), RV_OK);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_ERR_IO);
    char want[512];
    snprintf(want, sizeof want, "bad.jsonl:2: corrupt tuning record: %s", message);
    CHECK_STR_CONTAINS(rv_last_error(), want);
    tune_records_free(&rs);
}

#define GOOD_START "{\"version\":1,\"program\":\"ab\",\"machine\":\"m\",\"trace\":\"t\","

static void test_corrupt_lines(void) {
    expect_corrupt("{\"version\":1,", "not valid JSON");
    expect_corrupt("[1, 2]", "not a JSON object");
    expect_corrupt("{\"program\":\"ab\"}", "\"version\" is missing");
    expect_corrupt("{\"version\":2,\"program\":\"ab\"}", "\"version\" is missing or not 1");
    expect_corrupt("{\"version\":1,\"program\":\"\"}", "\"program\" is missing");
    expect_corrupt("{\"version\":1,\"program\":\"ab\",\"machine\":\"m\"}", "\"trace\" is missing");
    expect_corrupt(GOOD_START "\"shape\":[1],\"seconds\":1,\"status\":\"ok\"}",
                   "\"shape\" is missing");
    expect_corrupt(GOOD_START "\"shape\":{\"T\":1.5},\"seconds\":1,\"status\":\"ok\"}",
                   "\"shape\" has a size that is not an integer");
    expect_corrupt(GOOD_START "\"shape\":{\"T\":1,\"T\":2},\"seconds\":1,\"status\":\"ok\"}",
                   "\"shape\" names a size twice");
    expect_corrupt(GOOD_START "\"shape\":{\"T\":1},\"seconds\":-1,\"status\":\"ok\"}",
                   "\"seconds\"");
    expect_corrupt(GOOD_START "\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"fast\"}",
                   "\"status\" is not one of ok, wrong, failed");
    expect_corrupt(GOOD_START "\"shape\":{\"T\":1},\"seconds\":1}", "\"status\" is missing");
    /* The same line is fine when whole. */
    TuneRecords rs;
    tune_records_init(&rs);
    const char *ok = GOOD_START "\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"failed\"}\n\n";
    CHECK_EQ_INT(tune_records_parse("mem", ok, strlen(ok), &rs), RV_OK);
    CHECK(rs.len == 1 && rs.data[0].status == TUNE_STATUS_FAILED);
    tune_records_free(&rs);
}

/* A record says the threads it was measured on: the same candidate and
 * shape at 1 and at 2 threads are two records, each found by its count,
 * and a line without the field (written before it) reads as 0. */
static void test_threads(void) {
    const char *path = tmp_path("threads.jsonl");
    TuneRecord one = record(16, "split i 4", 2e-4, TUNE_STATUS_OK);
    one.threads = 1;
    TuneRecord two = record(16, "split i 4", 1.1e-4, TUNE_STATUS_OK);
    two.threads = 2;
    CHECK_EQ_INT(tune_record_append(path, &one), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &two), RV_OK);
    char *json = tune_record_to_json(&two);
    CHECK_STR_CONTAINS(json, "\"threads\":2");
    base_free(json);
    append_text(path, GOOD_START "\"shape\":{\"T\":16,\"K\":768},\"seconds\":3e-4,"
                                 "\"status\":\"ok\"}\n");
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 3);
    const char *names_kt[] = {"K", "T"};
    int64_t kt[] = {768, 16};
    const TuneRecord *r1 = tune_records_find(&rs, "3fa9c0de12345678", 1, names_kt, kt, 2, "split i 4");
    const TuneRecord *r2 = tune_records_find(&rs, "3fa9c0de12345678", 2, names_kt, kt, 2, "split i 4");
    CHECK(r1 && r1->threads == 1 && r1->seconds == 2e-4);
    CHECK(r2 && r2->threads == 2 && r2->seconds == 1.1e-4);
    CHECK(tune_records_find(&rs, "3fa9c0de12345678", 4, names_kt, kt, 2, "split i 4") == NULL);
    CHECK(rs.data[2].threads == 0);
    tune_records_free(&rs);
    expect_corrupt(GOOD_START "\"threads\":0,\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"threads\" is not an integer in 1..4096");
    expect_corrupt(GOOD_START "\"threads\":1.5,\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"threads\" is not an integer");
}

/* "clock":"cpu" names a 1-thread time of the process's CPU time; a
 * record without the field (written before it) or with "wall" is of the
 * wall clock, which is not written; any other value is an error naming
 * the field. */
static void test_clock(void) {
    const char *path = tmp_path("clock.jsonl");
    TuneRecord cpu = record(8, "split i 4", 1e-4, TUNE_STATUS_OK);
    cpu.threads = 1;
    cpu.clock = TUNE_CLOCK_CPU;
    TuneRecord wall = record(9, "split i 4", 1e-4, TUNE_STATUS_OK);
    CHECK_EQ_INT(tune_record_append(path, &cpu), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &wall), RV_OK);
    char *json = tune_record_to_json(&cpu);
    CHECK_STR_CONTAINS(json, "\"clock\":\"cpu\"");
    base_free(json);
    json = tune_record_to_json(&wall);
    CHECK(strstr(json, "clock") == NULL);
    base_free(json);
    append_text(path, GOOD_START "\"clock\":\"wall\",\"shape\":{\"T\":10},\"seconds\":1,"
                                 "\"status\":\"ok\"}\n");
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 3);
    CHECK(rs.data[0].clock == TUNE_CLOCK_CPU);
    CHECK(rs.data[1].clock == TUNE_CLOCK_WALL && rs.data[2].clock == TUNE_CLOCK_WALL);
    tune_records_free(&rs);
    expect_corrupt(GOOD_START "\"clock\":\"tsc\",\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"clock\" is not one of wall, cpu");
    expect_corrupt(GOOD_START "\"clock\":1,\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"clock\" is not one of wall, cpu");
}

/* A specialized measurement ("spec":true: the candidate compiled for the
 * shape alone) of the same trace and shape as a generic one: both kept,
 * the generic one found by lookup (a spec never replaces it); a record
 * without the field (written before it) is generic; a "spec" that is
 * not a boolean is an error naming the field. */
static void test_spec(void) {
    const char *path = tmp_path("spec.jsonl");
    TuneRecord gen = record(8, "split i 4", 2e-4, TUNE_STATUS_OK);
    TuneRecord spec = record(8, "split i 4", 1e-4, TUNE_STATUS_OK);
    spec.spec = true;
    CHECK_EQ_INT(tune_record_append(path, &gen), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &spec), RV_OK);
    char *json = tune_record_to_json(&spec);
    CHECK_STR_CONTAINS(json, "\"spec\":true");
    base_free(json);
    json = tune_record_to_json(&gen);
    CHECK(strstr(json, "spec") == NULL);
    base_free(json);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 2);
    CHECK(!rs.data[0].spec && rs.data[1].spec);
    CHECK(rs.data[1].seconds == 1e-4);
    const char *names_kt[] = {"K", "T"};
    int64_t kt[] = {768, 8};
    const TuneRecord *r =
        tune_records_find(&rs, "3fa9c0de12345678", 0, names_kt, kt, 2, "split i 4");
    CHECK(r && !r->spec && r->seconds == 2e-4);
    tune_records_free(&rs);
    expect_corrupt(GOOD_START "\"spec\":1,\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"spec\" is not true or false");
}

/* "code" names the code a record timed (rv_program_code_key): written
 * when set, read back; a record is current for that key alone; one
 * without it (written before the field, perhaps with the older
 * "codegen", which is still read) is never current; a malformed "code"
 * or "codegen" is corrupt, naming the line. */
static void test_code_key(void) {
    const char *path = tmp_path("code.jsonl");
    const char *key = "0123456789abcdef0123456789abcdef";
    const char *other = "ffffffffffffffff0000000000000000";
    TuneRecord cur = record(8, "split i 4", 2e-4, TUNE_STATUS_OK);
    cur.code = key;
    TuneRecord old = record(9, "split i 4", 2e-4, TUNE_STATUS_OK);
    old.codegen = "0123456789abcdef"; /* the field before "code" */
    TuneRecord unknown = record(10, "split i 4", 2e-4, TUNE_STATUS_OK);
    CHECK(tune_record_current(&cur, key) && !tune_record_current(&cur, other) &&
          !tune_record_current(&cur, NULL));
    CHECK(!tune_record_current(&old, key) && !tune_record_current(&unknown, key));
    CHECK_EQ_INT(tune_record_append(path, &cur), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &old), RV_OK);
    CHECK_EQ_INT(tune_record_append(path, &unknown), RV_OK);
    char *json = tune_record_to_json(&unknown);
    CHECK(strstr(json, "code") == NULL);
    base_free(json);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 3);
    CHECK(rs.data[0].code && strcmp(rs.data[0].code, key) == 0);
    CHECK(tune_record_current(&rs.data[0], key));
    CHECK(rs.data[1].codegen && strcmp(rs.data[1].codegen, "0123456789abcdef") == 0);
    CHECK(rs.data[1].code == NULL && !tune_record_current(&rs.data[1], key));
    CHECK(rs.data[2].code == NULL && !tune_record_current(&rs.data[2], key));
    tune_records_free(&rs);
    expect_corrupt(GOOD_START
                   "\"codegen\":\"\",\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"codegen\" is not a non-empty string");
    expect_corrupt(GOOD_START "\"code\":7,\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"code\" is not a key of 32 hex digits");
    expect_corrupt(GOOD_START
                   "\"code\":\"0123\",\"shape\":{\"T\":1},\"seconds\":1,\"status\":\"ok\"}",
                   "\"code\" is not a key of 32 hex digits");
    expect_corrupt(GOOD_START "\"code\":\"0123456789ABCDEF0123456789abcdef\",\"shape\":{\"T\":1},"
                              "\"seconds\":1,\"status\":\"ok\"}",
                   "\"code\" is not a key of 32 hex digits");
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    RUN(test_round_trip);
    RUN(test_one_line_format);
    RUN(test_missing_file);
    RUN(test_torn_last_line);
    RUN(test_corrupt_lines);
    RUN(test_concurrent_appends);
    RUN(test_threads);
    RUN(test_spec);
    RUN(test_clock);
    RUN(test_code_key);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
    return harness_report();
}
