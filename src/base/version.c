/*
 * version.c — rv_version(): the version of the library a program runs with.
 *
 * The RV_VERSION_* macros of ravel.h tell a program what it was compiled
 * against; this function tells it what it was linked with at run time (a
 * newer libravel.so.MAJOR may have been installed since).
 */
#include "ravel.h"

#define RV_STR_(x) #x
#define RV_STR(x) RV_STR_(x)

const char *rv_version(void) {
    return RV_STR(RV_VERSION_MAJOR) "." RV_STR(RV_VERSION_MINOR) "." RV_STR(RV_VERSION_PATCH);
}
