/* test_tune_hw.c — the hardware facts (src/tune/hw.c): the sysfs parsers on
 * a fake tree, the cpuid cache leaves against sysfs on this machine, and the
 * fallbacks with their notes when nothing can be read. */
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tune/tune.h"

static void put(const char *dir, const char *file, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void mkdirs(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    CHECK_EQ_INT(system(cmd), 0);
}

/* Four logical CPUs on two cores (two threads each), one package. */
static void make_fake_sysfs(const char *root) {
    static const char *const lvl[] = {"1", "1", "2", "3"};
    static const char *const type[] = {"Data", "Instruction", "Unified", "Unified"};
    static const char *const size[] = {"48K", "32K", "2048K", "32M"};
    char dir[512];
    for (int i = 0; i < 4; i++) {
        snprintf(dir, sizeof dir, "%s/cpu0/cache/index%d", root, i);
        mkdirs(dir);
        put(dir, "level", lvl[i]);
        put(dir, "type", type[i]);
        put(dir, "size", size[i]);
        put(dir, "coherency_line_size", "64\n");
        put(dir, "ways_of_associativity", i == 0 ? "12\n" : "16\n");
    }
    for (int c = 0; c < 4; c++) {
        char id[8];
        snprintf(dir, sizeof dir, "%s/cpu%d/topology", root, c);
        mkdirs(dir);
        snprintf(id, sizeof id, "%d\n", c % 2);
        put(dir, "core_id", id);
        put(dir, "physical_package_id", "0\n");
    }
    /* Not CPUs: must be ignored. */
    snprintf(dir, sizeof dir, "%s/cpufreq", root);
    mkdirs(dir);
    snprintf(dir, sizeof dir, "%s/cpuidle", root);
    mkdirs(dir);
}

static void test_fake_sysfs(void) {
    char root[] = "/tmp/ravel_test_hw_XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    make_fake_sysfs(root);
    TuneHw hw;
    tune_hw_probe(root, false, &hw);
    CHECK_EQ_INT(hw.l1d_bytes, 48 << 10);
    CHECK_EQ_INT(hw.l2_bytes, 2048 << 10);
    CHECK_EQ_INT(hw.l3_bytes, 32 << 20);
    CHECK_EQ_INT(hw.line_bytes, 64);
    CHECK_EQ_INT(hw.l1d_ways, 12);
    CHECK_EQ_INT(hw.cache_src, TUNE_SRC_SYSFS);
    CHECK_EQ_INT(hw.logical_cores, 4);
    CHECK_EQ_INT(hw.physical_cores, 2);
    CHECK_EQ_INT(hw.physical_src, TUNE_SRC_SYSFS);
    /* Without cpuid the ISA is unknown, and said so. */
    CHECK_EQ_INT(hw.isa, TUNE_ISA_UNKNOWN);
    CHECK_EQ_INT(hw.vector_bytes, 0);
    CHECK_STR_CONTAINS(hw.notes, "vector ISA unknown");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK_EQ_INT(system(cmd), 0);
}

static void test_nothing_readable(void) {
    TuneHw hw;
    tune_hw_probe("/nonexistent/sys/cpu", false, &hw);
    CHECK_EQ_INT(hw.cache_src, TUNE_SRC_NONE);
    CHECK_EQ_INT(hw.l1d_bytes, 32 << 10);
    CHECK_EQ_INT(hw.l2_bytes, 256 << 10);
    CHECK_EQ_INT(hw.l3_bytes, 0);
    CHECK_EQ_INT(hw.logical_cores, sysconf(_SC_NPROCESSORS_ONLN));
    CHECK_EQ_INT(hw.logical_src, TUNE_SRC_OS);
    CHECK_EQ_INT(hw.physical_cores, hw.logical_cores);
    CHECK_EQ_INT(hw.physical_src, TUNE_SRC_NONE);
    CHECK_STR_CONTAINS(hw.notes, "cache sizes unknown");
    CHECK_STR_CONTAINS(hw.notes, "physical core count unknown");
    Buf b = {0};
    tune_hw_format(&hw, &b);
    CHECK_STR_CONTAINS(buf_str(&b), "L1d cache:        32 KiB (line 64 B, 8-way)  [fallback]");
    CHECK_STR_CONTAINS(buf_str(&b), "note: ");
    buf_free(&b);
}

/* This machine: self-consistent facts; cpuid's cache leaves agree with
 * sysfs on L1d and L2 where both exist. */
static void test_this_machine(void) {
    const TuneHw *hw = tune_hw();
    CHECK(tune_hw() == hw);
    CHECK(hw->l1d_bytes > 0);
    CHECK(hw->l2_bytes >= hw->l1d_bytes);
    CHECK(hw->logical_cores >= 1);
    CHECK(hw->physical_cores >= 1 && hw->physical_cores <= hw->logical_cores);
    CHECK(hw->usable_cores >= 1 && hw->usable_cores <= hw->logical_cores);
    switch (hw->isa) {
    case TUNE_ISA_AVX512:
        CHECK(hw->vector_bytes == 64 && hw->vector_regs == 32);
        break;
    case TUNE_ISA_AVX2:
    case TUNE_ISA_AVX:
        CHECK(hw->vector_bytes == 32 && hw->vector_regs == 16);
        break;
    case TUNE_ISA_SSE2:
        CHECK(hw->vector_bytes == 16 && hw->vector_regs == 16);
        break;
    default:
        CHECK(hw->vector_bytes == 0);
        break;
    }
#if defined(__x86_64__)
    CHECK(hw->isa >= TUNE_ISA_SSE2);
    CHECK_EQ_INT(hw->isa_src, TUNE_SRC_CPUID);
    if (hw->cache_src == TUNE_SRC_SYSFS) {
        TuneHw c;
        tune_hw_probe("/nonexistent/sys/cpu", true, &c);
        if (c.cache_src == TUNE_SRC_CPUID) {
            CHECK_EQ_INT(c.l1d_bytes, hw->l1d_bytes);
            CHECK_EQ_INT(c.l2_bytes, hw->l2_bytes);
            CHECK_EQ_INT(c.l1d_ways, hw->l1d_ways);
        }
    }
#endif
    Buf b = {0};
    tune_hw_format(hw, &b);
    CHECK_STR_CONTAINS(buf_str(&b), "vector ISA:");
    CHECK_STR_CONTAINS(buf_str(&b), "physical cores:");
    printf("%s", buf_str(&b));
    buf_free(&b);
    tune_hw_machine_id(hw, &b);
    printf("machine id: %s\n", buf_str(&b));
    CHECK(strchr(buf_str(&b), '\n') == NULL);
    CHECK_STR_CONTAINS(buf_str(&b), tune_isa_name(hw->isa));
#if defined(__x86_64__)
    CHECK(hw->cpu_name[0] != 0);
    CHECK_STR_CONTAINS(buf_str(&b), hw->cpu_name);
#endif
    buf_free(&b);
}

int main(void) {
    RUN(test_fake_sysfs);
    RUN(test_nothing_readable);
    RUN(test_this_machine);
    return harness_report();
}
