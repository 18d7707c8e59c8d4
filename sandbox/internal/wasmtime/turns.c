// turns.c: core turns: at most cores guest calls that outlive a tick run
// at once; the queue of calls waiting for a turn (earliest deadline
// first), the hand-over and the pinning of the woken thread to the giver's
// core, the turns that linger with a thread whose call was stopped, and
// giving a turn up for a blocking host call.
#include "glue_private.h"

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

// ---- core turns -------------------------------------------------------------
//
// A guest call that outlives an epoch tick takes a turn on a core: at most
// t->cores such calls run at once, the rest wait (blocked, not runnable),
// as only GOMAXPROCS wazero guests (goroutines) run at once. Without turns
// the OS time-slices more runnable guest threads than cores at several
// milliseconds, and a runaway guest that is not on a core when its
// deadline tick comes stops that much late. See RATIONALE.md, "Runaway
// guests stop on time on wasmtime: core turns".
//
// - A call holding a turn passes it to the first waiting call at a tick
//   once it has held it CB_SLICE_TICKS ticks, or at once when that call
//   is within CB_NEAR_TICKS ticks of its deadline, and queues again; a
//   call within CB_NEAR_TICKS of its own deadline keeps its turn, so it
//   is on a core when its deadline comes.
// - The queue is ordered by deadline, earliest first (a call without one
//   counts as due CB_NO_DEADLINE_KEY_NS after it queued, so it is not
//   starved). A waiting call wakes at its own deadline and stops without
//   a turn; the context watcher wakes a canceled one (cb_guard_poke).
// - The thread passing a turn on pins the thread it wakes to its own core
//   until that one runs (core_give).
// - When the epoch callback stops a call, its thread keeps the turn for
//   one more tick (it lingers), as a goroutine keeps its P when a cgo
//   call returns: the host's work after the stop (reading the error,
//   discarding the instance, starting the next call) then does not wait
//   behind a guest handed the core, which the OS would let run a whole
//   time slice first. The thread's next call takes the lingering turn
//   back; otherwise the ticker hands it on once the tick is over. Calls
//   that end normally hand their turn on at once.
// - A call about to sleep in a host call (a WASI clock subscription)
//   gives its turn up (cb_guard_release_turn), and takes one again at
//   its next tick.
// - Calls shorter than a tick never take a turn and pay nothing.

#define CB_NO_DEADLINE_KEY_NS 1000000000LL
#define CB_NEAR_TICKS 2
#define CB_SLICE_TICKS 4

// The turn lingering with this thread, if any: its ticker, slot and owner
// number (the slot is still the thread's while its owner matches).
static __thread struct {
  cb_ticker_t *t;
  size_t slot;
  uint64_t owner;
} cb_lingering;

// set_head_key mirrors the first waiting call's key for cb__take_turn's
// lock-free look. Called with cores_mu held.
static void set_head_key(cb_ticker_t *t) {
  __atomic_store_n(&t->head_key, t->waiting ? t->waiting->waiting_key : INT64_MAX,
                   __ATOMIC_RELEASE);
}

// core_give hands a turn nobody holds to the first waiting call, or back
// to the pool. Called with cores_mu held.
//
// here is the core the giving thread runs on when it is about to wait for
// a turn itself (-1 otherwise): the waking call is pinned to it until it
// runs. The OS would otherwise queue it on the core it last ran on, busy
// with another guest, and leave this core idle once the giver blocks
// (an idle core pulls waiting threads only when it has been idle long
// enough to be worth it), so the turn would sit unused for a time slice.
static void core_give(cb_ticker_t *t, int here) {
  cb_guard_t *h = t->waiting;
  if (!h) {
    t->free_cores++;
    return;
  }
  t->waiting = h->next_waiting;
  h->next_waiting = NULL;
  __atomic_store_n(&t->n_waiting, t->n_waiting - 1, __ATOMIC_RELEASE);
  set_head_key(t);
  h->core = 1;
#ifdef __linux__
  if (here >= 0 && h->has_mask && here < CPU_SETSIZE && CPU_ISSET(here, &h->mask)) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(here, &one);
    h->pinned = sched_setaffinity(h->tid, sizeof(one), &one) == 0;
  }
#else
  (void)here;
#endif
  pthread_cond_signal(&h->wake);
}

// cb__linger_expire hands on every lingering turn whose tick is over. Called
// with cores_mu held.
void cb__linger_expire(cb_ticker_t *t, int64_t now) {
  for (int64_t i = 0; i < t->cores && t->n_lingering > 0; i++) {
    cb_linger_t *l = &t->linger[i];
    if (l->owner != 0 && l->until <= now) {
      l->owner = 0;
      __atomic_store_n(&t->n_lingering, t->n_lingering - 1, __ATOMIC_RELEASE);
      core_give(t, -1);
    }
  }
}

// linger_reclaim takes back the turn lingering with this thread, if it
// still does: 1 when it did. Called with cores_mu held.
static int linger_reclaim(cb_ticker_t *t) {
  if (cb_lingering.t != t || cb_lingering.owner == 0) {
    return 0;
  }
  cb_linger_t *l = &t->linger[cb_lingering.slot];
  uint64_t owner = cb_lingering.owner;
  cb_lingering.owner = 0;
  if (l->owner != owner) {
    return 0; // handed on already
  }
  l->owner = 0;
  __atomic_store_n(&t->n_lingering, t->n_lingering - 1, __ATOMIC_RELEASE);
  return 1;
}

// core_end gives up g's turn: a call the epoch callback stopped leaves it
// lingering with this thread for a tick, any other (a call that returned,
// or one about to sleep in a host call) hands it on at once. Called with
// cores_mu held. (A thread never has a turn lingering while its call holds
// one: the call's first tick took the lingering one back, or found it
// handed on and forgot it.)
static void core_end(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  g->core = 0;
  if (g->tripped == CB_TRIP_NONE) {
    core_give(t, -1);
    return;
  }
  for (int64_t i = 0; i < t->cores; i++) {
    cb_linger_t *l = &t->linger[i];
    if (l->owner == 0) {
      l->owner = ++t->linger_seq;
      l->until = now + t->interval_ns;
      __atomic_store_n(&t->n_lingering, t->n_lingering + 1, __ATOMIC_RELEASE);
      cb_lingering.t = t;
      cb_lingering.slot = (size_t)i;
      cb_lingering.owner = l->owner;
      return;
    }
  }
  core_give(t, -1); // cannot happen: turns held and lingering are at most cores
}

static void queue_remove(cb_ticker_t *t, cb_guard_t *g) {
  for (cb_guard_t **p = &t->waiting; *p; p = &(*p)->next_waiting) {
    if (*p == g) {
      *p = g->next_waiting;
      g->next_waiting = NULL;
      __atomic_store_n(&t->n_waiting, t->n_waiting - 1, __ATOMIC_RELEASE);
      set_head_key(t);
      return;
    }
  }
}

// core_wait_prepare records what core_give needs to pin g's thread: its
// id and the cores it may run on, to go back to. Called before g queues.
static void core_wait_prepare(cb_guard_t *g) {
#ifdef __linux__
  g->tid = (int32_t)syscall(SYS_gettid);
  g->has_mask = sched_getaffinity(0, sizeof(g->mask), &g->mask) == 0;
  g->pinned = 0;
#else
  (void)g;
#endif
}

// core_wait queues g and waits for a turn: CB_TRIP_NONE once it has one,
// or why the call must stop first. Called with cores_mu held.
static int core_wait(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  g->waiting_key = g->deadline_ns ? g->deadline_ns : now + CB_NO_DEADLINE_KEY_NS;
  cb_guard_t **p = &t->waiting;
  while (*p && (*p)->waiting_key <= g->waiting_key) {
    p = &(*p)->next_waiting;
  }
  g->next_waiting = *p;
  *p = g;
  __atomic_store_n(&t->n_waiting, t->n_waiting + 1, __ATOMIC_RELEASE);
  set_head_key(t);
  for (;;) {
    if (g->core) {
      g->turn_since = now;
#ifdef __linux__
      if (g->pinned) {
        g->pinned = 0;
        (void)sched_setaffinity(0, sizeof(g->mask), &g->mask);
      }
#endif
      return CB_TRIP_NONE;
    }
    if (g->deadline_ns && now >= g->deadline_ns) {
      queue_remove(t, g);
      return CB_TRIP_DEADLINE;
    }
    if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) == g->seq) {
      queue_remove(t, g);
      return CB_TRIP_STOP;
    }
    if (g->deadline_ns) {
      struct timespec ts = {g->deadline_ns / 1000000000,
                            g->deadline_ns % 1000000000};
      pthread_cond_timedwait(&g->wake, &t->cores_mu, &ts);
    } else {
      pthread_cond_wait(&g->wake, &t->cores_mu);
    }
    now = mono_ns();
  }
}

// cb__take_turn runs at every tick of a call: it takes a turn if the call has
// none, or passes it on when others wait and the call's deadline is not
// near. It returns CB_TRIP_NONE, or why the call must stop.
int cb__take_turn(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  if (t->cores == 0) {
    return CB_TRIP_NONE; // no limit
  }
  if (g->core) {
    int64_t near = CB_NEAR_TICKS * t->interval_ns;
    if (__atomic_load_n(&t->n_waiting, __ATOMIC_ACQUIRE) == 0 ||
        (g->deadline_ns && g->deadline_ns - now <= near)) {
      return CB_TRIP_NONE; // nobody waits, or this call's deadline is near
    }
    if (now - g->turn_since < CB_SLICE_TICKS * t->interval_ns &&
        __atomic_load_n(&t->head_key, __ATOMIC_ACQUIRE) - now > near) {
      return CB_TRIP_NONE; // its slice goes on, and nobody waiting is due
    }
  }
  pthread_mutex_lock(&t->cores_mu);
  int r = CB_TRIP_NONE;
  if (g->core) {
    if (t->waiting) {
      g->core = 0;
      core_wait_prepare(g);
#ifdef __linux__
      core_give(t, sched_getcpu());
#else
      core_give(t, -1);
#endif
      r = core_wait(t, g, now);
    }
  } else if (linger_reclaim(t)) {
    g->core = 1;
    g->turn_since = now;
  } else {
    cb__linger_expire(t, now);
    if (t->free_cores > 0) {
      t->free_cores--;
      g->core = 1;
      g->turn_since = now;
    } else {
      core_wait_prepare(g);
      r = core_wait(t, g, now);
    }
  }
  pthread_mutex_unlock(&t->cores_mu);
  return r;
}

// cb__turn_end gives up the turn g's call holds, if any (core_end). Only the
// call's own thread sets core while the call holds a turn, so the unlocked
// read is exact.
void cb__turn_end(cb_guard_t *g) {
  if (!g->core) {
    return;
  }
  cb_ticker_t *t = g->ticker;
  pthread_mutex_lock(&t->cores_mu);
  core_end(t, g, mono_ns());
  pthread_mutex_unlock(&t->cores_mu);
}

void cb_guard_release_turn(cb_guard_t *g) {
  if (g->core) {
    __atomic_add_fetch(&g->ticker->given_up, 1, __ATOMIC_RELAXED);
  }
  cb__turn_end(g);
}

void cb_ticker_turns(cb_ticker_t *t, int64_t *free_cores, int32_t *waiting, uint64_t *given_up) {
  pthread_mutex_lock(&t->cores_mu);
  *free_cores = t->free_cores;
  *waiting = t->n_waiting;
  pthread_mutex_unlock(&t->cores_mu);
  *given_up = __atomic_load_n(&t->given_up, __ATOMIC_RELAXED);
}

void cb_guard_poke(cb_guard_t *g) {
  cb_ticker_t *t = g->ticker;
  pthread_mutex_lock(&t->cores_mu);
  pthread_cond_signal(&g->wake);
  pthread_mutex_unlock(&t->cores_mu);
}
