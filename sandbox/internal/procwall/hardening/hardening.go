// Package hardening is the worker's account of its lockdown, as the
// worker writes it (procwall/lockdown) and the host reads it (procwall,
// sandbox.WorkerInfo): every step, applied or not, never silently
// skipped. It imports nothing, so the host's side needs nothing of the
// lockdown's own dependencies.
package hardening

// Step is one hardening measure and whether it took.
type Step struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Detail  string `json:"detail"`
}

// Report lists every step of one worker's lockdown.
type Report struct {
	Steps []Step `json:"steps"`
	// RealtimeThread is the id of the worker's thread that should run at
	// a real-time priority (SCHED_FIFO 1): wasmtime's epoch ticker, which
	// the worker, holding no capability, cannot raise itself. The host
	// raises it when it may and records the step ("realtime_ticker"). It
	// comes in the hello, before the worker has read a byte of a guest; 0:
	// none.
	RealtimeThread int `json:"realtime_thread,omitempty"`
}

// Add records a step: applied when err is nil (with detail), else not
// (with err's text).
func (r *Report) Add(name string, err error, detail string) {
	if err != nil {
		r.Steps = append(r.Steps, Step{Name: name, Detail: err.Error()})
		return
	}
	r.Steps = append(r.Steps, Step{Name: name, Applied: true, Detail: detail})
}
