package host

import (
	"context"
	"fmt"
	"os"

	"github.com/seed4b3e0ccb/callbox/config"
)

// ReloadResult says what a Reload did, by callback name.
type ReloadResult struct {
	Kept     []string // unchanged: module bytes and every setting; their warm pools kept
	Replaced []string // changed: loaded anew, the old version closed after its last call
	Added    []string
	Removed  []string
}

// Reload replaces the host's configuration with cfg without stopping it.
// Every callback of cfg (its modules entries expanded) whose module bytes
// and settings are unchanged keeps its loaded module and warm pool; a
// changed one is loaded anew; one no longer in cfg is removed. Everything
// new is loaded before anything changes: if any callback fails to load,
// Reload returns that error (naming the file and callback) and the old
// configuration keeps serving, untouched. Then the switch is atomic: calls
// admitted before it finish on the version they started on, calls after it
// get the new one, and a replaced or removed callback is closed once its
// last call has left (a *Callback looked up before then fails later calls
// with ErrReplaced). Named chains survive: their calls find callbacks by
// name. cfg's cache_dir is not applied: engines and their caches stay.
// Reloads are serialized.
//
// To re-read a file and its environment overrides, load it again
// (configfile.Load) and pass the result; configfile.Watch does that on
// every change of the file.
func (h *Host) Reload(ctx context.Context, cfg *config.Config) (ReloadResult, error) {
	var res ReloadResult
	if cfg == nil {
		return res, fmt.Errorf("reload: no configuration")
	}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	specs, err := expandModules(cfg)
	if err != nil {
		return res, err
	}
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()

	h.mu.RLock()
	closed := h.closed
	current := make(map[string]*Callback, len(h.callbacks))
	for n, c := range h.callbacks {
		current[n] = c
	}
	h.mu.RUnlock()
	if closed {
		return res, ErrClosed
	}

	// Load what changed, before touching anything.
	next := make(map[string]*Callback, len(specs))
	order := make([]*Callback, 0, len(specs))
	var built []*Callback
	fail := func(err error) (ReloadResult, error) {
		for _, c := range built {
			_ = c.close(ctx)
		}
		if cfg.File != "" {
			return ReloadResult{}, fmt.Errorf("%s: %w", cfg.File, err)
		}
		return ReloadResult{}, err
	}
	for _, spec := range specs {
		if spec.Export == "" {
			spec.Export = spec.Name
		}
		wasm, err := os.ReadFile(spec.Module)
		if err != nil {
			return fail(fmt.Errorf("callback %q: %w", spec.Name, err))
		}
		if old, ok := current[spec.Name]; ok && old.unchanged(spec, wasm) {
			next[spec.Name] = old
			order = append(order, old)
			res.Kept = append(res.Kept, spec.Name)
			continue
		}
		c, err := h.load(ctx, spec, wasm, nil)
		if err != nil {
			return fail(newLoadError(spec.Name, err))
		}
		built = append(built, c)
		next[spec.Name] = c
		order = append(order, c)
		if _, ok := current[spec.Name]; ok {
			res.Replaced = append(res.Replaced, spec.Name)
		} else {
			res.Added = append(res.Added, spec.Name)
		}
	}
	var retired []*Callback
	for n, c := range current {
		if next[n] != c {
			retired = append(retired, c)
			if _, ok := next[n]; !ok {
				res.Removed = append(res.Removed, n)
			}
		}
	}

	// The switch.
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return fail(ErrClosed)
	}
	h.callbacks, h.byID, h.ambiguous = next, map[string]*Callback{}, map[string][]string{}
	for _, c := range order {
		h.indexByIDLocked(c)
	}
	for _, c := range retired {
		c.retired = true
	}
	h.file = cfg.File
	h.mu.Unlock()

	// Retire the old versions after their last call, off the caller's
	// goroutine: a call in flight may run to its timeout. Close waits.
	for _, c := range retired {
		h.retiring.Add(1)
		go func(c *Callback) {
			defer h.retiring.Done()
			c.inflight.Wait()
			_ = c.close(context.WithoutCancel(ctx))
		}(c)
	}
	h.logger.Info("callbox: configuration reloaded", "file", cfg.File, "kept", len(res.Kept),
		"replaced", len(res.Replaced), "added", len(res.Added), "removed", len(res.Removed))
	return res, nil
}

// unchanged reports whether spec, with module bytes wasm, is exactly what
// c was loaded from.
func (c *Callback) unchanged(spec config.Callback, wasm []byte) bool {
	return c.sha == moduleSHA(wasm) && c.spec == spec
}
