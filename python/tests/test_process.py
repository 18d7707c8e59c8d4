"""isolation: process through the Python door: a callback runs in a
callbox-worker process (build/callbox-worker beside the library), and a
worker killed mid-call fails that call as callbox.WorkerDied naming the
signal, with the out= array untouched; the next call runs on a new
worker."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import callbox
from conftest import ROOT

WORKER = ROOT / "build" / "callbox-worker"


def _workers():
    """The pids of this process's callbox-worker children."""
    me = os.getpid()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == me and comm.startswith("callbox-worke"):
            out.append(int(pid))
    return out


def _cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[11])


def _config(guest_dir, name, export, extra=""):
    return """\
worker: %s
callbacks:
  %s:
    module: %s/kit.wasm
    export: %s
    signature: "(x: f32[n]) -> f32[n]"
    isolation: process
%s""" % (WORKER, name, guest_dir, export, extra)


@pytest.fixture
def walled(guest_dir):
    """Two hosts: one with copy_walled, one with spin_walled (20 s), and
    the pid of the spin callback's worker (the one its host started)."""
    if not WORKER.exists():
        pytest.skip("%s is missing: isolation: process cannot run here (make lib builds it)" % WORKER)
    with callbox.Host(_config(guest_dir, "copy_walled", "copy")) as copy:
        before = set(_workers())
        with callbox.Host(_config(guest_dir, "spin_walled", "spin", "    timeout: 20s\n")) as spin:
            (spin_pid,) = set(_workers()) - before
            yield copy, spin, spin_pid


def test_call_in_a_worker(walled):
    copy, _, _ = walled
    assert len(_workers()) == 2, "one worker per callback"
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(copy.call("copy_walled", x), x)


def test_worker_killed_mid_call(walled):
    copy, spin, spin_pid = walled
    out = np.full(4, -7.0, dtype=np.float32)
    caught = []

    def call():
        try:
            spin.call("spin_walled", np.zeros(4, dtype=np.float32), out=out)
        except callbox.CallbackError as e:
            caught.append(e)

    t = threading.Thread(target=call)
    start = _cpu_ticks(spin_pid)
    t.start()
    deadline = time.monotonic() + 15
    while _cpu_ticks(spin_pid) < start + 5:  # the guest is spinning
        assert time.monotonic() < deadline, "the guest never started"
        time.sleep(0.001)
    os.kill(spin_pid, signal.SIGKILL)
    t.join(30)
    assert not t.is_alive()
    assert len(caught) == 1
    e = caught[0]
    assert isinstance(e, callbox.WorkerDied), repr(e)
    assert e.kind == "WorkerDied" and e.callback == "spin_walled"
    assert "killed by signal SIGKILL" in str(e)
    assert (out == -7.0).all(), "a failed call writes no output"
    # the other callback's worker was not touched; the next call works
    x = np.ones(3, dtype=np.float32)
    np.testing.assert_array_equal(copy.call("copy_walled", x), x)
