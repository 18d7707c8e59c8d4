// callbox_cancel_on_signal's C half: a handler that, when the signal
// arrives, writes the token registered for it to a pipe (the one
// async-signal-safe way to reach Go, whose watcher goroutine then fires
// the token) and chains to the handler it replaced, so the program's own
// handling (Python's KeyboardInterrupt) still happens.
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "signals.h"

#define CBX_NSIG 65

static struct sigaction cbx_prev[CBX_NSIG];
static uint64_t cbx_sig_token[CBX_NSIG];
static int cbx_pipe_fds[2] = {-1, -1};
static pthread_mutex_t cbx_sig_mu = PTHREAD_MUTEX_INITIALIZER;

int cbx_in_fork_child(void);  // exports.c

static void cbx_on_signal(int signo, siginfo_t *info, void *uctx) {
  int saved = errno;
  uint64_t tok = __atomic_load_n(&cbx_sig_token[signo], __ATOMIC_RELAXED);
  int fd = __atomic_load_n(&cbx_pipe_fds[1], __ATOMIC_RELAXED);
  // A fork child inherits this handler and the pipe's write end, which the
  // parent reads: a signal to the child must not cancel the parent's
  // calls. The child only chains to the program's handler.
  if (tok != 0 && fd >= 0 && !cbx_in_fork_child()) {
    ssize_t r = write(fd, &tok, sizeof tok);  // non-blocking: a full pipe drops it
    (void)r;
  }
  errno = saved;
  struct sigaction *p = &cbx_prev[signo];
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction != NULL) p->sa_sigaction(signo, info, uctx);
  } else if (p->sa_handler == SIG_DFL) {
    // The default action (SIGINT, SIGTERM: terminate): restore it and
    // raise again; it is delivered when this handler returns.
    sigaction(signo, p, NULL);
    raise(signo);
  } else if (p->sa_handler != SIG_IGN) {
    p->sa_handler(signo);
  }
}

int cbx_signal_pipe(void) {
  pthread_mutex_lock(&cbx_sig_mu);
  if (cbx_pipe_fds[0] < 0) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      cbx_pipe_fds[0] = fds[0];
      __atomic_store_n(&cbx_pipe_fds[1], fds[1], __ATOMIC_RELEASE);
    }
  }
  int fd = cbx_pipe_fds[0];
  pthread_mutex_unlock(&cbx_sig_mu);
  return fd;
}

int cbx_signal_install(int signo, uint64_t token) {
  if (signo <= 0 || signo >= CBX_NSIG) return EINVAL;
  switch (signo) {
    case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGKILL: case SIGSTOP: case SIGPROF: case SIGURG:
      return EINVAL;  // the Go runtime's and wasmtime's, or not catchable
  }
  pthread_mutex_lock(&cbx_sig_mu);
  __atomic_store_n(&cbx_sig_token[signo], token, __ATOMIC_RELEASE);
  struct sigaction cur;
  int err = 0;
  if (sigaction(signo, NULL, &cur) != 0) {
    err = errno;
  } else if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == cbx_on_signal)) {
    // Not ours (first time, or the program installed its own since):
    // install, chaining to whatever is there now.
    // The program's flags and mask are kept: a handler installed without
    // SA_RESTART (Python's) lets its blocking calls be interrupted, and
    // must go on doing so. Under the default or ignored disposition there
    // is no handler of the program's to follow: SA_RESTART, so that a
    // program ignoring the signal sees no EINTR it never saw before (the
    // default action ends the process anyway).
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = cbx_on_signal;
    int program_handler = (cur.sa_flags & SA_SIGINFO) || (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (program_handler ? (cur.sa_flags & SA_RESTART) : SA_RESTART);
    sa.sa_mask = cur.sa_mask;
    cbx_prev[signo] = cur;
    if (sigaction(signo, &sa, NULL) != 0) err = errno;
  }
  pthread_mutex_unlock(&cbx_sig_mu);
  return err;
}
