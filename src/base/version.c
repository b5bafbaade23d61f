/*
 * version.c — rv_version(): the version of the library a program runs with.
 *
 * The RV_VERSION_* macros of ravel.h tell a program what it was compiled
 * against; this function tells it what it was linked with at run time (a
 * newer libravel.so.MAJOR may have been installed since). rv_struct_size
 * tells a binding that mirrors the public structs whether its copies
 * match the library's.
 */
#include <string.h>

#include "ravel.h"

#define RV_STR_(x) #x
#define RV_STR(x) RV_STR_(x)

const char *rv_version(void) {
    return RV_STR(RV_VERSION_MAJOR) "." RV_STR(RV_VERSION_MINOR) "." RV_STR(RV_VERSION_PATCH);
}

size_t rv_struct_size(const char *name) {
    static const struct {
        const char *name;
        size_t size;
    } structs[] = {
        {"rv_compile_options", sizeof(rv_compile_options)},
        {"rv_program_counters", sizeof(rv_program_counters)},
        {"rv_linear", sizeof(rv_linear)},
        {"rv_array_info", sizeof(rv_array_info)},
    };
    if (name == NULL)
        return 0;
    for (size_t i = 0; i < sizeof structs / sizeof structs[0]; i++)
        if (strcmp(name, structs[i].name) == 0)
            return structs[i].size;
    return 0;
}
