"""One process of test_jax_distributed.py: JAX's own multi-process runtime
(jax.distributed over loopback, CPU collectives), two CPU devices here, one
sharded program over the four devices of both processes, with ordered
callbox calls. callbox runs in each process: this process opens its own
host from the config and registers it.

    python distributed_worker.py PROCESS_ID PORT CONFIG OUT_JSON

Writes OUT_JSON with what this process saw: its pid, the bump counts its
devices returned (from this process's host), the results of its shards,
and the error of the failing run, if it failed here."""

import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_NUM_CPU_DEVICES"] = "2"

import numpy as np  # noqa: E402

import jax  # noqa: E402

process_id, port, config, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address="127.0.0.1:" + port, num_processes=2, process_id=process_id,
                           initialization_timeout=60)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402

host = callbox.Host(config)
cbj.register(host)
shard_map = getattr(jax, "shard_map", None)
if shard_map is None:
    from jax.experimental.shard_map import shard_map

assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
spec = NamedSharding(mesh, P("i"))


def per_device(x):
    a = cbj.call("bump", x, ordered=True)
    y = cbj.call("nonneg_seq", x * 3, ordered=True)
    b = cbj.call("bump", x, ordered=True)
    return y, jnp.stack([a, b])[None]


f = jax.jit(shard_map(per_device, mesh=mesh, in_specs=P("i"), out_specs=(P("i"), P("i"))))


def run(local):
    """Runs f on the global array whose rows here are local; returns this
    process's shards of both results."""
    x = jax.make_array_from_process_local_data(spec, local)
    y, counts = f(x)
    ys = sorted(((s.index[0].start or 0, np.asarray(s.data).tolist()) for s in y.addressable_shards))
    cs = sorted(((s.index[0].start or 0, np.asarray(s.data).tolist()) for s in counts.addressable_shards))
    return ys, cs


report = {"pid": os.getpid(), "process": process_id}
# Run 1: every element non-negative; rows 4 per process (2 per device).
local = np.arange(4, dtype=np.float32) + 10 * process_id
report["ok"] = run(local)
# Run 2: process 1's first shard starts with -1, which nonneg refuses: the
# failure is raised in process 1; process 0 runs its shards through.
bad = local.copy()
if process_id == 1:
    bad[0] = -1
try:
    report["bad"] = run(bad)
except Exception as e:  # noqa: BLE001  (what this process saw is the result)
    report["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
report["bumps_after"] = int(host.call("bump", np.ones(1, np.float32)))
with open(out, "w") as fh:
    json.dump(report, fh)
host.close()
# Both processes are alive (a failed callback fails a computation, not the
# process): leave through JAX's shutdown barrier, so that neither exits
# while the other's coordination client still polls it (an exit without it
# made the other process abort: "the JAX distributed service detected
# fatal errors").
jax.distributed.shutdown()
