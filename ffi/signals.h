// Between signals.c and signal.go (internal to libcallbox).
#ifndef CALLBOX_SIGNALS_H
#define CALLBOX_SIGNALS_H
#include <stdint.h>
// The read end of the signal pipe (created once), or -1.
int cbx_signal_pipe(void);
// Installs the handler for signo, firing token; returns 0 or an errno.
int cbx_signal_install(int signo, uint64_t token);
#endif
