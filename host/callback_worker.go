package host

import "github.com/seed4b3e0ccb/callbox/sandbox/engines"

// WorkerInfo describes the worker process of a callback under isolation:
// process: its process id and each lockdown step, applied or not.
type WorkerInfo struct {
	// PID is the worker's process id (0 when none is running).
	PID int
	// Hardening lists each lockdown step, applied or not, with detail.
	Hardening []HardeningStep
}

// HardeningStep is one lockdown measure of a worker: its name, whether it
// was applied, and the detail (what it set, or why it could not).
type HardeningStep struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Detail  string `json:"detail"`
}

// Worker reports the worker process behind the callback, and false when
// the callback runs in this process (isolation pooled or fresh).
func (c *Callback) Worker() (WorkerInfo, bool) {
	w, ok := engines.ModuleWorker(c.mod)
	if !ok {
		return WorkerInfo{}, false
	}
	info := WorkerInfo{PID: w.PID, Hardening: make([]HardeningStep, len(w.Hardening))}
	for i, s := range w.Hardening {
		info.Hardening[i] = HardeningStep(s)
	}
	return info, true
}
