"""The hostile suite inside a Python process, through the callbox package.

    CALLBOX_LIB=... PYTHONPATH=python /usr/bin/python3 foreign.py MANIFEST PASSES THREADS

Runs every case of a manifest written by ffi/foreign_test.go (the format
is described in foreign.c) from a thread pool, with Python's own signal
handling in place: faulthandler's crash handlers (as pytest installs them),
Python's SIGINT handler (KeyboardInterrupt) and a custom SIGUSR1 handler,
all installed before the library loads, while another thread keeps sending
SIGUSR1. Prints the same CASE / MEM / FAIL / DONE lines as foreign.c and
exits 0 when nothing failed.
"""

import concurrent.futures
import faulthandler
import os
import signal
import sys
import threading
import time

import numpy as np

faulthandler.enable()  # Python's SIGSEGV/SIGBUS/SIGILL/SIGFPE handlers, first
usr1 = [0]
signal.signal(signal.SIGUSR1, lambda sig, frame: usr1.__setitem__(0, usr1[0] + 1))

import callbox  # noqa: E402  (the library loads after the handlers)

lock = threading.Lock()
failures = []


def say(*fields):
    with lock:
        print("\t".join(str(f) for f in fields), flush=True)


def fail(msg):
    with lock:
        failures.append(msg)
    say("FAIL", msg)


def floats(s):
    return None if s == "-" else np.array([float(v) for v in s.split(",")], dtype=np.float32)


def kind_of(call):
    try:
        return 0, call()
    except callbox.CallbackError as e:
        # One failure, one kind: the exception is an instance of its own
        # kind's class and of no other's (UnknownCallback and
        # FailedPrecondition are InvalidArgument's subclasses by design;
        # the hostile cases raise neither).
        classes = [cls for cls in callbox.errors.KINDS.values() if isinstance(e, cls)]
        if classes != [callbox.errors.KINDS.get(e.kind_number)]:
            fail("%s matches the kind classes %s" % (e, [c.__name__ for c in classes]))
        return e.kind_number, e


def run_call(pass_, h, engine, name, kind, before, x, want):
    x0 = np.array([0, 1, 2, 3], dtype=np.float32)
    for i in range(before):
        got, res = kind_of(lambda: h.call(name, x0.copy()))
        if got != 0 or not np.array_equal(res, x0):
            fail("%s/%s: call %d before the hostile one: %s" % (name, engine, i + 1, res))
            return
    xin = x.copy()
    start = time.monotonic()
    got, res = kind_of(lambda: h.call(name, xin))
    say("CASE", pass_, engine, name, got, "%.0f" % ((time.monotonic() - start) * 1e3))
    if got != kind:
        fail("%s/%s: kind %d, want %d: %s" % (name, engine, got, kind, res))
    if not np.array_equal(xin, x):
        fail("%s/%s: the caller's input changed" % (name, engine))
    if got == 0 and not np.array_equal(res, want):
        fail("%s/%s: wrong output" % (name, engine))
    if got != 0 and res.callback != name:
        fail("%s/%s: the error names callback %r" % (name, engine, res.callback))


def run_load(pass_, engine, name, kind, config):
    start = time.monotonic()
    got, res = kind_of(lambda: callbox.Host(config))
    say("CASE", pass_, engine, name, got, "%.0f" % ((time.monotonic() - start) * 1e3))
    if got != kind:
        fail("%s/%s: open: kind %d, want %d: %s" % (name, engine, got, kind, res))
    if got == 0:
        with res as h:
            x = np.array([1, 2, 3], dtype=np.float32)
            if not np.array_equal(h.call("healthy", x), x):
                fail("%s/%s: healthy call beside the loaded module" % (name, engine))
    elif res.callback != name:
        fail("%s/%s: the open's error names callback %r" % (name, engine, res.callback))


def memory(pass_):
    rss = threads = -1
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    say("MEM", pass_, rss, threads)


def main():
    manifest, passes, nthreads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    hosts, items = {}, []
    with open(manifest) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "host":
                hosts[fields[1]] = callbox.Host(fields[2])
            elif fields[0] == "call":
                items.append(("call", fields[1], fields[2], int(fields[3]), int(fields[4]), floats(fields[5]), floats(fields[6])))
            elif fields[0] == "load":
                items.append(("load", fields[1], fields[2], int(fields[3]), fields[4]))

    stop = threading.Event()
    sent = [0]

    def signaller():
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            sent[0] += 1
            time.sleep(0.002)

    sig = threading.Thread(target=signaller)
    sig.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=nthreads) as pool:
            for pass_ in range(1, passes + 1):
                futures = []
                for it in items:
                    if it[0] == "call":
                        futures.append(pool.submit(run_call, pass_, hosts[it[1]], *it[1:]))
                    else:
                        futures.append(pool.submit(run_load, pass_, *it[1:]))
                for fut in futures:
                    fut.result()  # an unexpected exception fails the run
                x = np.array([1, 2, 3], dtype=np.float32)
                for engine, h in hosts.items():
                    if not np.array_equal(h.call("healthy", x), x):
                        fail("healthy call on %s after pass %d" % (engine, pass_))
                memory(pass_)
    finally:
        stop.set()
        sig.join()

    # Python's own signal handling still works: the custom handler, and
    # the default SIGINT handler raising KeyboardInterrupt.
    before = usr1[0]
    signal.raise_signal(signal.SIGUSR1)
    say("SIG", "usr1", sent[0], before)
    if usr1[0] != before + 1:
        fail("raise_signal(SIGUSR1) did not run the Python handler")
    if before == 0:
        fail("none of the %d SIGUSR1 sent during the passes reached the Python handler" % sent[0])
    try:
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.01)
        fail("SIGINT did not raise KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    for h in hosts.values():
        h.close()
    say("DONE", len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
