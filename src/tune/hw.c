/*
 * hw.c — the facts about the machine the search space is built from
 * (issue 15): vector ISA, width and register count, cache sizes, core
 * counts. DietCode sizes its micro-kernels from the hardware; so do we, and
 * nothing here is hard-coded to the machine we develop on.
 *
 * Sources, in order: cpuid for the ISA (and the OS's XCR0, since a feature
 * the kernel does not save across context switches is unusable); sysfs for
 * caches and topology, which the kernel fills from cpuid for every vendor;
 * cpuid's cache leaves (Intel leaf 4, AMD leaf 0x8000001D) where sysfs is
 * absent (containers sometimes hide it); sysconf for the logical cores.
 * A fact none of them gives gets a stated fallback, marked TUNE_SRC_NONE
 * and explained in TuneHw.notes, so `ravel tune --hw` shows what it guessed.
 */
#include "tune/tune.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TUNE_HAVE_CPUID 1
#else
#define TUNE_HAVE_CPUID 0
#endif

static const char *const isa_names[] = {"unknown", "SSE2", "AVX", "AVX2", "AVX-512"};
_Static_assert(sizeof isa_names / sizeof isa_names[0] == TUNE_ISA_COUNT, "isa_names");
static const char *const source_names[] = {"fallback", "cpuid", "sysfs", "sysconf"};
_Static_assert(sizeof source_names / sizeof source_names[0] == TUNE_SRC_COUNT, "source_names");

const char *tune_isa_name(TuneIsa isa) {
    return isa_names[isa];
}
const char *tune_source_name(TuneSource src) {
    return source_names[src];
}

static void note(TuneHw *hw, const char *msg) {
    size_t n = strlen(hw->notes);
    snprintf(hw->notes + n, sizeof hw->notes - n, "%s%s", n ? "; " : "", msg);
}

/* ---- cpuid ---- */

#if TUNE_HAVE_CPUID
static bool cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) != 0;
}

/* XCR0: which register states the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512,
 * 17-18 AMX tiles). xgetbv is only legal when cpuid says OSXSAVE. */
static uint64_t xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static bool probe_isa_cpuid(TuneHw *hw) {
    unsigned r1[4], r7[4] = {0};
    if (!cpuid(1, 0, r1))
        return false;
    bool sse2 = r1[3] >> 26 & 1, osxsave = r1[2] >> 27 & 1, avx = r1[2] >> 28 & 1;
    bool fma = r1[2] >> 12 & 1;
    cpuid(7, 0, r7);
    uint64_t x = osxsave ? xcr0() : 0;
    bool os_avx = (x & 0x6) == 0x6, os_avx512 = (x & 0xe6) == 0xe6,
         os_amx = (x & 0x60000) == 0x60000;
    bool avx2 = r7[1] >> 5 & 1, avx512f = r7[1] >> 16 & 1;
    hw->isa = TUNE_ISA_UNKNOWN;
    if (sse2)
        hw->isa = TUNE_ISA_SSE2;
    if (avx && os_avx)
        hw->isa = TUNE_ISA_AVX;
    if (avx && avx2 && fma && os_avx)
        hw->isa = TUNE_ISA_AVX2;
    if (avx512f && os_avx512)
        hw->isa = TUNE_ISA_AVX512;
    hw->fma = fma && os_avx;
    hw->amx_tile = os_amx && (r7[3] >> 24 & 1);
    hw->amx_bf16 = hw->amx_tile && (r7[3] >> 22 & 1);
    hw->amx_int8 = hw->amx_tile && (r7[3] >> 25 & 1);
    hw->isa_src = TUNE_SRC_CPUID;
    /* The brand string: 48 bytes in leaves 0x80000002..4. */
    unsigned r[4];
    if (cpuid(0x80000000, 0, r) && r[0] >= 0x80000004) {
        char brand[49] = {0};
        for (unsigned i = 0; i < 3; i++) {
            cpuid(0x80000002 + i, 0, r);
            memcpy(brand + 16 * i, r, 16);
        }
        const char *b = brand;
        while (*b == ' ')
            b++;
        snprintf(hw->cpu_name, sizeof hw->cpu_name, "%s", b);
    }
    return true;
}

/* Deterministic cache parameters: Intel leaf 4, AMD leaf 0x8000001D, the
 * same layout (type and level in eax, ways/partitions/line in ebx, sets in
 * ecx, each minus one). */
static bool probe_caches_cpuid(TuneHw *hw) {
    unsigned r[4];
    if (!cpuid(0, 0, r))
        return false;
    char vendor[13];
    memcpy(vendor, &r[1], 4);
    memcpy(vendor + 4, &r[3], 4);
    memcpy(vendor + 8, &r[2], 4);
    vendor[12] = 0;
    unsigned leaf;
    if (strcmp(vendor, "GenuineIntel") == 0 && r[0] >= 4)
        leaf = 4;
    else if (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0)
        leaf = 0x8000001d;
    else
        return false;
    bool any = false;
    for (unsigned sub = 0; sub < 16; sub++) {
        if (!cpuid(leaf, sub, r))
            return false;
        unsigned type = r[0] & 0x1f, level = r[0] >> 5 & 0x7;
        if (type == 0)
            break;
        int64_t ways = (r[1] >> 22) + 1, parts = (r[1] >> 12 & 0x3ff) + 1;
        int64_t line = (r[1] & 0xfff) + 1, sets = (int64_t)r[2] + 1;
        int64_t size = ways * parts * line * sets;
        if (level == 1 && type == 1) {
            hw->l1d_bytes = size;
            hw->line_bytes = (int)line;
            hw->l1d_ways = (int)ways;
        } else if (level == 2 && type != 2) {
            hw->l2_bytes = size;
        } else if (level == 3 && type != 2) {
            hw->l3_bytes = size;
        }
        any = true;
    }
    if (any)
        hw->cache_src = TUNE_SRC_CPUID;
    return any && hw->l1d_bytes > 0;
}
#endif

/* ---- sysfs ---- */

/* The first line of a small sysfs file, or false when unreadable. */
static bool read_line(const char *path, char *out, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    if (ok)
        out[strcspn(out, "\n")] = 0;
    return ok;
}

static bool read_long(const char *path, long *out) {
    char s[64], *end;
    if (!read_line(path, s, sizeof s))
        return false;
    errno = 0;
    *out = strtol(s, &end, 10);
    return errno == 0 && end != s;
}

/* "48K", "2048K", "1M", "512": sysfs cache sizes. -1 when malformed. */
static int64_t parse_size(const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 0:
        return v;
    case 'K':
        return v << 10;
    case 'M':
        return v << 20;
    case 'G':
        return v << 30;
    default:
        return -1;
    }
}

static bool probe_caches_sysfs(const char *root, TuneHw *hw) {
    bool any = false;
    for (int i = 0; i < 16; i++) {
        char path[512], type[32], size[32];
        long level;
        snprintf(path, sizeof path, "%s/cpu0/cache/index%d/level", root, i);
        if (!read_long(path, &level))
            break;
        snprintf(path, sizeof path, "%s/cpu0/cache/index%d/type", root, i);
        if (!read_line(path, type, sizeof type))
            continue;
        snprintf(path, sizeof path, "%s/cpu0/cache/index%d/size", root, i);
        if (!read_line(path, size, sizeof size))
            continue;
        int64_t bytes = parse_size(size);
        if (bytes <= 0 || strcmp(type, "Instruction") == 0)
            continue;
        if (level == 1 && strcmp(type, "Data") == 0) {
            hw->l1d_bytes = bytes;
            long line;
            snprintf(path, sizeof path, "%s/cpu0/cache/index%d/coherency_line_size", root, i);
            if (read_long(path, &line) && line > 0)
                hw->line_bytes = (int)line;
            long ways;
            snprintf(path, sizeof path, "%s/cpu0/cache/index%d/ways_of_associativity", root, i);
            if (read_long(path, &ways) && ways > 0)
                hw->l1d_ways = (int)ways;
        } else if (level == 2) {
            hw->l2_bytes = bytes;
        } else if (level == 3) {
            hw->l3_bytes = bytes;
        }
        any = true;
    }
    if (any)
        hw->cache_src = TUNE_SRC_SYSFS;
    return any && hw->l1d_bytes > 0;
}

/* Logical cores: the cpuN directories with a topology (online CPUs);
 * physical cores:   distinct (package, core) pairs among them. */
static void probe_cores_sysfs(const char *root, TuneHw *hw) {
    DIR *d = opendir(root);
    if (!d)
        return;
    struct {
        long pkg, core;
    } *seen = NULL;
    int nseen = 0, cap = 0, logical = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "cpu", 3) != 0 || !e->d_name[3])
            continue;
        strtol(e->d_name + 3, &end, 10);
        if (*end)
            continue;
        char path[512];
        long pkg, core;
        snprintf(path, sizeof path, "%s/%s/topology/core_id", root, e->d_name);
        if (!read_long(path, &core))
            continue;
        snprintf(path, sizeof path, "%s/%s/topology/physical_package_id", root, e->d_name);
        if (!read_long(path, &pkg))
            pkg = 0;
        logical++;
        int k = 0;
        while (k < nseen && !(seen[k].pkg == pkg && seen[k].core == core))
            k++;
        if (k == nseen) {
            if (nseen == cap) {
                cap = cap ? 2 * cap : 64;
                seen = base_xrealloc(seen, sizeof *seen * (size_t)cap);
            }
            seen[nseen].pkg = pkg;
            seen[nseen++].core = core;
        }
    }
    closedir(d);
    base_free(seen);
    if (logical > 0) {
        hw->logical_cores = logical;
        hw->logical_src = TUNE_SRC_SYSFS;
        hw->physical_cores = nseen;
        hw->physical_src = TUNE_SRC_SYSFS;
    }
}

void tune_hw_probe(const char *sysfs_cpu, bool use_cpuid, TuneHw *hw) {
    memset(hw, 0, sizeof *hw);
    hw->line_bytes = 64;
    hw->l1d_ways = 8;
    bool isa = false, caches = probe_caches_sysfs(sysfs_cpu, hw);
#if TUNE_HAVE_CPUID
    if (use_cpuid) {
        isa = probe_isa_cpuid(hw);
        if (!caches)
            caches = probe_caches_cpuid(hw);
    }
#else
    (void)use_cpuid;
#endif
    if (!isa) {
        /* Scalar code is correct everywhere; the tuner then only varies
         * tiling, order and parallelism. */
        hw->isa = TUNE_ISA_UNKNOWN;
        hw->isa_src = TUNE_SRC_NONE;
        note(hw, TUNE_HAVE_CPUID ? "vector ISA unknown (cpuid not used): assuming scalar code"
                                 : "vector ISA unknown (not x86-64): assuming scalar code");
    }
    switch (hw->isa) {
    case TUNE_ISA_AVX512:
        hw->vector_bytes = 64;
        hw->vector_regs = 32;
        break;
    case TUNE_ISA_AVX2:
    case TUNE_ISA_AVX:
        hw->vector_bytes = 32;
        hw->vector_regs = 16;
        break;
    case TUNE_ISA_SSE2:
        hw->vector_bytes = 16;
        hw->vector_regs = 16;
        break;
    default:
        hw->vector_bytes = 0;
        hw->vector_regs = 0;
        break;
    }
    if (!caches) {
        /* Fallbacks small enough that tiles sized for them fit any real
         * cache of the level: tuning then finds less, but nothing breaks. */
        if (hw->l1d_bytes <= 0)
            hw->l1d_bytes = 32 << 10;
        if (hw->l2_bytes <= 0)
            hw->l2_bytes = 256 << 10;
        hw->cache_src = TUNE_SRC_NONE;
        note(hw, "cache sizes unknown (no sysfs cache entries or cpuid leaf): assuming "
                 "L1d 32 KiB, L2 256 KiB, no L3");
    }
    probe_cores_sysfs(sysfs_cpu, hw);
    if (hw->logical_src == TUNE_SRC_NONE) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        hw->logical_cores = n > 0 ? (int)n : 1;
        hw->logical_src = n > 0 ? TUNE_SRC_OS : TUNE_SRC_NONE;
        if (n <= 0)
            note(hw, "logical core count unknown: assuming 1");
    }
    /* A container or taskset may allow fewer CPUs than the machine has:
     * parallel candidates are sized for these. */
    cpu_set_t set;
    hw->usable_cores = hw->logical_cores;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 &&
        CPU_COUNT(&set) < hw->logical_cores)
        hw->usable_cores = CPU_COUNT(&set);
    if (hw->physical_src == TUNE_SRC_NONE) {
        hw->physical_cores = hw->logical_cores;
        note(hw, "physical core count unknown (no sysfs topology): assuming one per logical core");
    }
}

static TuneHw hw_cached;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
static void hw_init(void) {
    tune_hw_probe("/sys/devices/system/cpu", true, &hw_cached);
}

const TuneHw *tune_hw(void) {
    pthread_once(&hw_once, hw_init);
    return &hw_cached;
}

static void format_bytes(Buf *out, int64_t n) {
    if (n <= 0)
        buf_puts(out, "none");
    else if (n % (1 << 20) == 0)
        buf_printf(out, "%lld MiB", (long long)(n >> 20));
    else if (n % (1 << 10) == 0)
        buf_printf(out, "%lld KiB", (long long)(n >> 10));
    else
        buf_printf(out, "%lld B", (long long)n);
}

void tune_hw_machine_id(const TuneHw *hw, Buf *out) {
    buf_printf(out, "%s; %s%s; L1d %lldK L2 %lldK L3 %lldK; %d cores",
               hw->cpu_name[0] ? hw->cpu_name : "unknown CPU", tune_isa_name(hw->isa),
               hw->amx_tile ? "+AMX" : "", (long long)(hw->l1d_bytes >> 10),
               (long long)(hw->l2_bytes >> 10), (long long)(hw->l3_bytes >> 10),
               hw->physical_cores);
}

void tune_hw_format(const TuneHw *hw, Buf *out) {
    buf_printf(out, "CPU:              %s\n", hw->cpu_name[0] ? hw->cpu_name : "unknown");
    buf_printf(out, "vector ISA:       %s", tune_isa_name(hw->isa));
    if (hw->fma)
        buf_puts(out, " +FMA");
    if (hw->amx_tile)
        buf_printf(out, " +AMX (tile%s%s)", hw->amx_bf16 ? ", bf16" : "",
                   hw->amx_int8 ? ", int8" : "");
    buf_printf(out, "  [%s]\n", tune_source_name(hw->isa_src));
    buf_printf(out, "vector width:     %d bytes (%d floats)\n", hw->vector_bytes,
               hw->vector_bytes / 4);
    buf_printf(out, "vector registers: %d\n", hw->vector_regs);
    buf_puts(out, "L1d cache:        ");
    format_bytes(out, hw->l1d_bytes);
    buf_printf(out, " (line %d B, %d-way)  [%s]\n", hw->line_bytes, hw->l1d_ways,
               tune_source_name(hw->cache_src));
    buf_puts(out, "L2 cache:         ");
    format_bytes(out, hw->l2_bytes);
    buf_puts(out, "\nL3 cache:         ");
    format_bytes(out, hw->l3_bytes);
    buf_printf(out, "\nphysical cores:   %d  [%s]\n", hw->physical_cores,
               tune_source_name(hw->physical_src));
    buf_printf(out, "logical cores:    %d  [%s]\n", hw->logical_cores,
               tune_source_name(hw->logical_src));
    buf_printf(out, "usable cores:     %d  [affinity]\n", hw->usable_cores);
    if (hw->notes[0])
        buf_printf(out, "note: %s\n", hw->notes);
}
