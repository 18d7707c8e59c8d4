"""Past one machine, on JAX's own runtime: two JAX processes on this
machine (jax.distributed over loopback, CPU collectives) run one sharded
program with ordered callbox calls. Scale-out is JAX's: callbox runs in
each process, in its own host, and a failing call in one process raises
in that process (distributed_worker.py is one process)."""

import json
import os
import socket
import subprocess
import sys

import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: `make test` installs it (python/requirements-jax.txt)")

from conftest import ROOT  # noqa: E402

WORKER = ROOT / "python" / "tests" / "distributed_worker.py"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_one_sharded_program(config_path, tmp_path):
    port = str(_free_port())
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), CALLBOX_LOG_LEVEL="error")
    env.pop("JAX_NUM_CPU_DEVICES", None)
    outs = [tmp_path / ("p%d.json" % i) for i in range(2)]
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(i), port, str(config_path), str(outs[i])], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    logs = []
    try:
        for p in procs:
            # Bounded: a process that hangs (a lost peer) fails the test.
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for i, p in enumerate(procs):
        assert p.returncode == 0, "process %d exited %d:\n%s" % (i, p.returncode, logs[i][-4000:])
    r0, r1 = (json.loads(o.read_text()) for o in outs)
    assert r0["pid"] != r1["pid"]

    for r in (r0, r1):
        base = 10 * r["process"]
        ys, counts = r["ok"]
        # this process's two shards (rows 4p..4p+3 of the global array), right
        assert [start for start, _ in ys] == [4 * r["process"], 4 * r["process"] + 2]
        assert [v for _, shard in ys for v in shard] == [3.0 * (base + k) for k in range(4)]
        # each device's first bump precedes its second; the four bumps of
        # this process are 1..4: this process's own host counted them
        pairs = [shard[0] for _, shard in counts]
        assert all(a < b for a, b in pairs), pairs
        assert sorted(v for pair in pairs for v in pair) == [1, 2, 3, 4]

    # run 2: process 1's shard is refused, in process 1 only
    assert "error" not in r0, r0
    assert r0["bumps_after"] == 4 + 4 + 1
    assert 'callbox GuestError: callback "nonneg_seq"' in r1["error"], r1
    assert "bad input" in r1["error"]
    # its other device bumped twice; its failing device bumped once and
    # stopped at the refused call, before its second bump
    assert r1["bumps_after"] == 4 + 2 + 1 + 1
