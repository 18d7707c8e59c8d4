package core

import (
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
)

// Fuel is counted the same way on both engines: by the budget counter that
// sandbox/internal/meter compiles into the module at load time. One unit is one
// wasm instruction of straight-line code (a segment is charged in full when
// it starts), plus the bulk rates of package meter (memory.fill/copy/init
// per meter.BytesPerFuel bytes, table operations per element, memory.grow
// per page added) and the host's charges for imports that read or write
// guest bytes (HostByteFuel). The same module, input and budget therefore
// use the same fuel on either engine and fail at the same instruction.
//
// FuelMeter is the host side of that counter for one instance: it arms a
// call with a first slice of budget, refills it when the guest's counter
// runs out (the meter's refill import), and reads what the call used.
// Slices bound how long a guest runs between two refills; the engine
// decides their size (wazero checks its deadline there; wasmtime, whose
// epochs do that, uses long slices).
type FuelMeter struct {
	fuel    int64 // the call's budget; 0 = unlimited
	slice   int64
	granted int64 // fuel used plus the counter's value, as of the last grant
	floor   int64 // used as of the last refill
}

// LoadFuel bounds each service call of the ABI — the start function,
// _initialize, callbox_abi_version, callbox_signatures, callbox_alloc and
// callbox_free — when the callback sets a fuel budget: they never spend
// the callback's own budget, whatever it is. Half a second to a second of
// plain compiled code on this machine; the timeout applies as well.
const LoadFuel = 1 << 32

// IsServiceExport reports whether an export is one of the ABI's service
// functions, which run under LoadFuel rather than the callback's budget.
func IsServiceExport(name string) bool {
	switch name {
	case "_initialize", "callbox_abi_version", "callbox_signatures", "callbox_alloc", "callbox_free":
		return true
	}
	return false
}

// Begin arms a call with a budget of fuel units (0: unlimited) and returns
// the counter's first value, which the engine stores in the guest's
// counter.
func (f *FuelMeter) Begin(fuel uint64, slice int64) int64 {
	f.Start(fuel, slice, 0)
	return f.next(0)
}

// Start arms a call whose counter the engine cannot set first (the start
// function's, before the instance's exports are known): the counter holds
// counter, and the first check below zero refills it.
func (f *FuelMeter) Start(fuel uint64, slice int64, counter int64) {
	f.fuel, f.slice = int64(min(fuel, 1<<62)), slice
	f.granted, f.floor = counter, 0
}

// next grants a slice after used units, and returns the counter's value.
func (f *FuelMeter) next(used int64) int64 {
	budget := f.slice
	if f.fuel > 0 {
		budget = min(budget, f.fuel-used)
	}
	f.granted = used + budget
	return budget
}

// Refill is called with the guest's counter when it turned negative. It
// returns the counter's next value, or a FuelExhausted trap when the call
// has used more than its budget. A counter far below zero (a bulk
// operation charged more than a slice) is carried, so accounting stays
// exact.
func (f *FuelMeter) Refill(counter int64) (int64, *sandbox.Trap) {
	used := f.granted - counter
	f.floor = used
	if f.fuel > 0 && used > f.fuel {
		return 0, f.exhausted()
	}
	return f.next(used), nil
}

func (f *FuelMeter) exhausted() *sandbox.Trap {
	return FuelTrap(uint64(f.fuel))
}

// Used is the fuel a call used given the counter's value after it. It is
// exact after a normal return or FuelExhausted. After an interruption (a
// timeout, a trap) the counter may be stale, its latest value cached in a
// function's local, and the result is a floor: at most one slice short of
// what ran.
func (f *FuelMeter) Used(counter int64) uint64 {
	used := max(f.granted-counter, f.floor)
	if f.fuel > 0 {
		used = min(used, f.fuel)
	}
	return uint64(max(used, 0))
}

// Spent is the fuel the call has used when the guest's counter holds
// counter (the profiler's reports pass it).
func (f *FuelMeter) Spent(counter int64) int64 {
	return f.granted - counter
}

// HostByteFuel is what an import costs per guest byte it reads or writes
// (callbox.log, callbox.error, WASI fd_write and random_get): Go code
// scanning, copying or generating bytes runs at 0.4-2 ns a byte, against
// 0.01-0.03 ns for a byte of memory.fill, so the rate is far above
// meter.BytesPerFuel's.
const HostByteFuel = 4

// ChargeBytes is what an import that reads or writes n guest bytes costs.
func ChargeBytes(n uint64) int64 {
	return int64(min(n, 1<<59) * HostByteFuel)
}

// FuelCounter reads and writes the metered guest's budget counter (the
// meter's exported global) from a host function.
type FuelCounter interface {
	Get() int64
	Set(int64)
}

// ChargeBytes charges an import's work on n guest bytes to the call's fuel.
// It reports false, having recorded FuelExhausted, when that exhausts the
// budget; the import must then not do the work. Without metering (no
// counter) it charges nothing.
func (g *GuestState) ChargeBytes(n uint64) bool {
	if g.Counter == nil || n == 0 {
		return true
	}
	c := g.Counter.Get() - ChargeBytes(n)
	if c < 0 {
		next, t := g.Fuel.Refill(c)
		if t != nil {
			g.Fail(t)
			return false
		}
		c = next
	}
	g.Counter.Set(c)
	return true
}

// RefillFunc is the meter's refill import for engines that interrupt
// guests by other means (wasmtime's epochs): fuel accounting only.
func RefillFunc() HostFunc {
	return HostFunc{Module: meter.RefillModule, Name: meter.RefillName, Params: []sandbox.ValType{sandbox.I64}, Results: []sandbox.ValType{sandbox.I64},
		Fn: func(g *GuestState, _ []byte, s []uint64) {
			next, t := g.Fuel.Refill(int64(s[0]))
			if t != nil {
				g.Fail(t)
				return
			}
			s[0] = uint64(next)
		}}
}

// OverflowFunc is the meter's stack-overflow import.
func OverflowFunc(limit uint64) HostFunc {
	return HostFunc{Module: meter.RefillModule, Name: meter.OverflowName,
		Fn: func(g *GuestState, _ []byte, _ []uint64) {
			g.Fail(StackOverflowTrap(limit))
		}}
}
