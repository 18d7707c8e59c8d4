/*
 * callbox/log.h — errors, logs and panics: the host's error and
 * log imports (ABI.md §1) and the functions over them.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/log.h"
#endif

/* ---- Host imports (ABI.md §1) ------------------------------------------ */

__attribute__((import_module("callbox"), import_name("error")))
void callbox__host_error(const char *ptr, size_t len);
__attribute__((import_module("callbox"), import_name("log")))
void callbox__host_log(int32_t level, const char *ptr, size_t len);

/* ---- Errors, logs, panics ---------------------------------------------- */

/* A strlen of its own (no_builtin: never a call to one). */
CALLBOX__NO_BUILTIN static inline size_t callbox__strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

static inline size_t callbox_format(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

static inline int callbox_error(int status, const char *message)
{
    callbox__host_error(message, callbox__strlen(message));
    return status;
}

__attribute__((format(printf, 2, 3)))
static inline int callbox_errorf(int status, const char *fmt, ...)
{
    char buf[CALLBOX_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    callbox__host_error(buf, n);
    return status;
}

static inline void callbox_log(int level, const char *message)
{
    callbox__host_log(level, message, callbox__strlen(message));
}

__attribute__((format(printf, 2, 3)))
static inline void callbox_logf(int level, const char *fmt, ...)
{
    char buf[CALLBOX_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    callbox__host_log(level, buf, n);
}

_Noreturn static inline void callbox_panic(const char *message)
{
    callbox_error(CALLBOX_INTERNAL, message);
    __builtin_trap();
}
