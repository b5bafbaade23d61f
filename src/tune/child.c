/*
 * child.c — running measurements in a child process (issue 15): a
 * candidate kernel that crashes (a segfault, an abort) or never returns
 * must cost the tuner that candidate, not the run. The tuner forks a
 * child per batch; the child runs the batch's candidates and sends what
 * it finds as fixed-size messages over a pipe; the parent waits for each
 * message at most a timeout, so a child that dies or hangs is seen, its
 * candidate in progress is marked failed, and a fresh child goes on with
 * the rest of the batch.
 *
 * Fixed-size messages of at most PIPE_BUF bytes are written atomically,
 * so the parent never reads half a message from a child that died while
 * writing one.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/program.h"
#include "tune/tune.h"

rv_status tune_child_start(TuneChild *c, void (*fn)(int fd, void *user), void *user) {
    c->pid = -1;
    c->fd = -1;
    int p[2];
    if (pipe(p) != 0)
        return base_error(RV_ERR_IO, "pipe: %s", strerror(errno));
    /* buffered output would otherwise be written by both processes */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return base_error(RV_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(p[0]);
        /* a crashing candidate is expected here: no core file per crash */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        fn(p[1], user);
        close(p[1]);
        _exit(0); /* not exit: the parent's atexit handlers and stdio are its own */
    }
    close(p[1]);
    c->pid = pid;
    c->fd = p[0];
    return RV_OK;
}

void tune_child_send(int fd, const void *msg, size_t size) {
    const char *s = msg;
    while (size > 0) {
        ssize_t w = write(fd, s, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3); /* the parent is gone */
        s += w;
        size -= (size_t)w;
    }
}

/* Waits for the child and says how it ended into why. */
static void reap(TuneChild *c, Buf *why) {
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        buf_printf(why, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        buf_printf(why, "exited with status %d", WEXITSTATUS(status));
    else
        buf_puts(why, "ended before its results");
    close(c->fd);
    c->pid = -1;
    c->fd = -1;
}

int tune_child_read(TuneChild *c, void *msg, size_t size, double timeout, Buf *why) {
    size_t got = 0;
    double deadline = rt_now_seconds() + timeout;
    while (got < size) {
        double left = deadline - rt_now_seconds();
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int r = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            kill(c->pid, SIGKILL);
            Buf ignored = {0};
            reap(c, &ignored);
            buf_free(&ignored);
            buf_printf(why, "gave no result in %g s and was killed", timeout);
            return -1;
        }
        ssize_t n = r > 0 ? read(c->fd, (char *)msg + got, size - got) : -1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            reap(c, why);
            return 0;
        }
        got += (size_t)n;
    }
    return 1;
}

void tune_child_finish(TuneChild *c) {
    if (c->pid < 0)
        return;
    Buf why = {0};
    reap(c, &why);
    buf_free(&why);
}
