package host

import "github.com/seed4b3e0ccb/callbox/sandbox"

// WorkerInfo describes the worker process of a callback under isolation:
// process: its process id and each lockdown step, applied or not.
type WorkerInfo = sandbox.WorkerInfo

// HardeningStep is one lockdown measure of a worker.
type HardeningStep = sandbox.HardeningStep

// Worker reports the worker process behind the callback, and false when
// the callback runs in this process (isolation pooled or fresh).
func (c *Callback) Worker() (WorkerInfo, bool) { return sandbox.ModuleWorker(c.mod) }
