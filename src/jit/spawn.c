/*
 * spawn.c — running the C compiler with its output captured.
 *
 * The JIT needs two things from a child process: its exit status and
 * everything it printed, so that a failed compile can be reported with the
 * compiler's full log. We use posix_spawnp with an argument vector (never a
 * shell, so paths and flags need no escaping), stdin from /dev/null, and
 * stdout and stderr joined into one pipe, in the order the compiler wrote
 * them. The pipe is created close-on-exec so that compilers started by
 * other threads at the same moment do not inherit our write end (which
 * would hold our read open until their child exits).
 *
 * jit_argv_string renders a command for messages, quoted so that it can be
 * pasted into a shell to reproduce a failure by hand.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/jit.h"

extern char **environ;

/* Reads fd until end of file into b. */
static void read_all(int fd, Buf *b) {
    char chunk[4096];
    for (;;) {
        ssize_t k = read(fd, chunk, sizeof chunk - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        chunk[k] = '\0';
        /* The compiler's output is text; a stray NUL would only cut it short. */
        buf_puts(b, chunk);
    }
}

/* Waits for pid; returns its exit status or 128 + the signal that ended it. */
static int wait_child(pid_t pid) {
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR)
            return 127;
    }
    if (WIFEXITED(ws))
        return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws))
        return 128 + WTERMSIG(ws);
    return 127;
}

rv_status jit_run(char *const *argv, char **output, int *exit_code) {
    *output = NULL;
    *exit_code = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return base_error(RV_ERR_COMPILER, "cannot run '%s': pipe: %s", argv[0], strerror(errno));

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return base_error(RV_ERR_COMPILER, "cannot run '%s': %s", argv[0], strerror(rc));
    }

    Buf b = {0};
    read_all(fds[0], &b);
    close(fds[0]);
    *exit_code = wait_child(pid);
    *output = b.data ? buf_take(&b) : base_xstrdup("");
    return RV_OK;
}

/* True when s can be shown to a shell without quotes. */
static bool shell_safe(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++) {
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=,:+%@", *s))
            return false;
    }
    return true;
}

char *jit_argv_string(char *const *argv) {
    Buf b = {0};
    for (int i = 0; argv[i]; i++) {
        if (i)
            buf_putc(&b, ' ');
        if (shell_safe(argv[i])) {
            buf_puts(&b, argv[i]);
            continue;
        }
        /* Single quotes protect everything except a single quote itself. */
        buf_putc(&b, '\'');
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'')
                buf_puts(&b, "'\\''");
            else
                buf_putc(&b, *p);
        }
        buf_putc(&b, '\'');
    }
    return b.data ? buf_take(&b) : base_xstrdup("");
}
