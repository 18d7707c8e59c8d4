// ticker.c: the epoch ticker: the thread that advances every registered
// engine's epoch each interval and at the earliest deadline of a running
// call, parking while no call runs; the registration of engines and of
// guards (whose deadlines it reads); and the count of running calls that
// wakes it (cb__ticker_enter, cb__ticker_exit). The core turns it hands on
// are turns.c's.
#include "glue_private.h"

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// earliest_deadline is the earliest deadline after `after` of a running
// call, or INT64_MAX. Called with t->mu held.
static int64_t earliest_deadline(cb_ticker_t *t, int64_t after) {
  int64_t best = INT64_MAX;
  for (size_t i = 0; i < t->n_guards; i++) {
    int64_t d = __atomic_load_n(&t->guards[i]->deadline_ns, __ATOMIC_RELAXED);
    if (d > after && d < best) {
      best = d;
    }
  }
  return best;
}

static void sleep_until(int64_t when) {
  struct timespec ts = {when / 1000000000, when % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

// The thread ticks every interval, and also at the earliest deadline of a
// running call: a call's deadline then trips within the wake-up latency of
// this thread, not up to a whole interval late.
static void *ticker_main(void *arg) {
  cb_ticker_t *t = arg;
#ifdef __linux__
  // The default timer slack (50 us) delays every wake-up by as much.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  int32_t tid = (int32_t)syscall(SYS_gettid);
#else
  int32_t tid = -1;
#endif
  pthread_mutex_lock(&t->mu);
  t->tid = tid; // cb_ticker_new waits for it
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mu);
  // A real-time priority, where the process may take one (CAP_SYS_NICE or
  // RLIMIT_RTPRIO), lets a tick preempt CPU-bound threads at once instead
  // of waiting for the scheduler to give this thread a turn. The thread
  // runs for microseconds per tick. Without the right it stays as it is.
  struct sched_param sp = {.sched_priority = 1};
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
  int64_t next_tick = 0;
  int64_t ticked_until = 0; // deadlines up to here have had their tick
  for (;;) {
    if (!__atomic_load_n(&t->running, __ATOMIC_ACQUIRE)) {
      pthread_mutex_lock(&t->mu);
      while (!t->closed && !__atomic_load_n(&t->running, __ATOMIC_ACQUIRE)) {
        pthread_cond_wait(&t->cond, &t->mu);
      }
      pthread_mutex_unlock(&t->mu);
      next_tick = 0;
    }
    if (__atomic_load_n(&t->closed, __ATOMIC_ACQUIRE)) {
      return NULL;
    }
    int64_t now = mono_ns();
    if (next_tick == 0 || next_tick < now - t->interval_ns) {
      next_tick = now + t->interval_ns; // (re)start the period
    }
    pthread_mutex_lock(&t->mu);
    int64_t deadline = earliest_deadline(t, ticked_until);
    pthread_mutex_unlock(&t->mu);
    int64_t wake = deadline < next_tick ? deadline : next_tick;
    if (wake > now) {
      sleep_until(wake);
      now = mono_ns();
    }
    if (now >= next_tick) {
      next_tick += t->interval_ns;
    }
    if (deadline <= now) {
      ticked_until = now; // this tick is for it
    }
    if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) == 0) {
      // Idle: park. A call that entered after the load may have seen
      // running still set and not woken us, so look once more.
      __atomic_store_n(&t->running, 0, __ATOMIC_RELEASE);
      int32_t zero = 0;
      if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) == 0 ||
          !__atomic_compare_exchange_n(&t->running, &zero, 1, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        continue;
      }
    }
    if (__atomic_load_n(&t->n_lingering, __ATOMIC_ACQUIRE) > 0) {
      pthread_mutex_lock(&t->cores_mu);
      cb__linger_expire(t, now);
      pthread_mutex_unlock(&t->cores_mu);
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n_engines; i++) {
      wasmtime_engine_increment_epoch(t->engines[i]);
    }
    pthread_mutex_unlock(&t->mu);
  }
}

cb_ticker_t *cb_ticker_new(int64_t interval_ns, int64_t cores) {
  cb_ticker_t *t = calloc(1, sizeof(cb_ticker_t));
  if (!t) {
    return NULL;
  }
  t->interval_ns = interval_ns;
  t->cores = cores > 0 ? cores : 0;
  // Priority inheritance: the ticker thread may run at a real-time
  // priority, and must not wait behind a normal thread preempted while
  // holding the lock (registering an instance, say).
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
  pthread_mutex_init(&t->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_cond_init(&t->cond, NULL);
  pthread_mutex_init(&t->cores_mu, NULL);
  t->free_cores = t->cores;
  t->head_key = INT64_MAX;
  t->linger = calloc(t->cores > 0 ? (size_t)t->cores : 1, sizeof(cb_linger_t));
  if (!t->linger || pthread_create(&t->thread, NULL, ticker_main, t) != 0) {
    free(t->linger);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->cores_mu);
    free(t);
    return NULL;
  }
  pthread_mutex_lock(&t->mu);
  while (t->tid == 0) {
    pthread_cond_wait(&t->cond, &t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  return t;
}

int32_t cb_ticker_tid(cb_ticker_t *t) { return t->tid; }

int cb_ticker_add(cb_ticker_t *t, wasm_engine_t *engine) {
  pthread_mutex_lock(&t->mu);
  int ok = t->n_engines < CB_MAX_ENGINES;
  if (ok) {
    t->engines[t->n_engines++] = engine;
  }
  pthread_mutex_unlock(&t->mu);
  return ok;
}

void cb_ticker_close(cb_ticker_t *t) {
  pthread_mutex_lock(&t->mu);
  __atomic_store_n(&t->closed, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&t->cond);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->thread, NULL);
  pthread_cond_destroy(&t->cond);
  pthread_mutex_destroy(&t->mu);
  pthread_mutex_destroy(&t->cores_mu);
  free(t->linger);
  free(t->guards);
  free(t);
}

int cb_ticker_register(cb_ticker_t *t, cb_guard_t *g) {
  pthread_mutex_lock(&t->mu);
  if (t->n_guards == t->cap_guards) {
    size_t cap = t->cap_guards ? 2 * t->cap_guards : 64;
    cb_guard_t **grown = realloc(t->guards, cap * sizeof(*grown));
    if (!grown) {
      pthread_mutex_unlock(&t->mu);
      return 0;
    }
    t->guards = grown;
    t->cap_guards = cap;
  }
  t->guards[t->n_guards++] = g;
  pthread_mutex_unlock(&t->mu);
  return 1;
}

void cb_ticker_unregister(cb_ticker_t *t, cb_guard_t *g) {
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n_guards; i++) {
    if (t->guards[i] == g) {
      t->guards[i] = t->guards[--t->n_guards];
      break;
    }
  }
  pthread_mutex_unlock(&t->mu);
}

// cb__ticker_enter marks a call as running, waking the thread if it is
// parked: two atomic operations per call, a lock only on the idle-to-busy
// edge.
void cb__ticker_enter(cb_ticker_t *t) {
  __atomic_add_fetch(&t->active, 1, __ATOMIC_ACQ_REL);
  int32_t zero = 0;
  if (!__atomic_load_n(&t->running, __ATOMIC_ACQUIRE) &&
      __atomic_compare_exchange_n(&t->running, &zero, 1, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->mu);
  }
}

void cb__ticker_exit(cb_ticker_t *t) {
  __atomic_sub_fetch(&t->active, 1, __ATOMIC_ACQ_REL);
}
