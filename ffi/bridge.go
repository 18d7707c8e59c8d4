//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/host"
)

// cbInfo is a loaded callback as the bridge sees it.
type cbInfo struct {
	index     int
	name      string
	id        string
	signature string
	engine    string
	batching  string
	sig       *abi.Signature
	cb        *host.Callback // resolved once per catalog: calls do no lookup by name
	cinfo     unsafe.Pointer // its callbox_callback_info (C memory, capi.go), set at publish, freed at close
	cparams   unsafe.Pointer // its callbox_param_info array (C memory, capi.go), as cinfo
	cat       *catalog       // the catalog it belongs to
}

// catalog is the bridge's table of a host's callbacks, built at open and
// again at each reload; a reload swaps in a new one whole, and the old
// ones (whose C infos a C caller may still hold) are freed at close.
type catalog struct {
	infos []*cbInfo          // sorted by name
	byKey map[string]*cbInfo // by name and by content id
	idErr map[string]error   // content ids the host refuses (ambiguous), with its error
}

// bridgeHost is one open host behind a handle.
type bridgeHost struct {
	handle uint64
	h      *host.Host
	// gpu is the host's GPU path (package cuda): the CUDA XLA handler
	// (callbox_xla_ffi_cuda) and callbox_cuda_call_dlpack call the default
	// host through it (gpu.go). The CUDA runtime loads on the first GPU
	// call.
	gpu     *cuda.GPU
	cat     atomic.Pointer[catalog] // the current callbacks
	retired []*catalog              // catalogs replaced by reloads, freed at close (under mu)
	last    atomic.Pointer[cbInfo]
	closed  atomic.Bool
	// calls counts calls in flight through the bridge, so that close can
	// free C-side data only once none can read it.
	calls sync.WaitGroup
	mu    sync.Mutex // serializes close and reload
}

// openHost loads cfg into a new host, with a GPU path (its copy mode from
// CALLBOX_CUDA_COPY) whose hooks unpin an instance's memory when the host
// discards it.
func openHost(ctx context.Context, cfg *config.Config) (*bridgeHost, error) {
	var bh *bridgeHost
	err := onGoThread(func() (err error) {
		bh, err = openHostHere(ctx, cfg)
		return err
	})
	return bh, err
}

// onGoThread runs fn on a goroutine of its own and waits for it. Opening
// and reloading compile modules, and wasmtime compiles in a cgo call on
// the stack of the thread the goroutine runs on: the C caller's own when
// fn runs on the goroutine that entered from C (an Erlang dirty scheduler
// has 320 KB, a thread a program made may have less), but a thread the Go
// runtime made (a default-sized pthread stack) when fn runs on a new
// goroutine. So no caller of the C API needs a big stack to open a host;
// calls need none either (the engine switches stacks when a thread is
// short, stack.c). A few µs, against a compile's milliseconds. A panic in
// fn is raised again on the caller's goroutine, where the entry's guard
// turns it into a HostPanic error.
func onGoThread(fn func() error) error {
	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panicked: true, value: p}
			}
		}()
		done <- result{err: fn()}
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.err
}

// openHostHere is openHost on the calling goroutine.
func openHostHere(ctx context.Context, cfg *config.Config) (*bridgeHost, error) {
	logger := bridgeLogger()
	gpu, err := newGPU(getenv, logger)
	if err != nil {
		return nil, err
	}
	h, err := host.New(ctx, cfg, host.WithLogger(logger), host.WithoutCallTiming(), gpu.Hooks())
	if err != nil {
		_ = gpu.Close()
		return nil, err
	}
	bh, err := newBridgeHost(h)
	if err != nil {
		_ = h.Close(ctx)
		_ = gpu.Close()
		return nil, err
	}
	bh.gpu = gpu
	return bh, nil
}

// newBridgeHost resolves every callback of h once: a call through the
// bridge finds its *host.Callback in the bridge's own table.
func newBridgeHost(h *host.Host) (*bridgeHost, error) {
	cat, err := newCatalog(h)
	if err != nil {
		return nil, err
	}
	bh := &bridgeHost{h: h}
	bh.cat.Store(cat)
	return bh, nil
}

// newCatalog resolves every callback h has now.
func newCatalog(h *host.Host) (*catalog, error) {
	cat := &catalog{byKey: map[string]*cbInfo{}}
	infos := h.Callbacks()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	for i, in := range infos {
		cb, err := h.Lookup(in.Name)
		if err != nil {
			return nil, err
		}
		// The host's resolved rule: a callback from a modules entry is not
		// in cfg's callbacks section, and the host owns the rule.
		ci := &cbInfo{index: i, name: in.Name, id: in.ID, signature: in.Signature.String(),
			engine: in.Engine, batching: in.Batching, sig: in.Signature, cb: cb, cat: cat}
		cat.infos = append(cat.infos, ci)
		cat.byKey[ci.name] = ci
	}
	// A content id resolves as the host resolves it: to the callback the
	// host picks, or, when callbacks under different settings share it, to
	// the host's refusal naming them (ErrAmbiguousID).
	for _, ci := range cat.infos {
		if _, done := cat.byKey[ci.id]; done || cat.idErr[ci.id] != nil {
			continue
		}
		cb, err := h.Lookup(ci.id)
		if err != nil {
			if cat.idErr == nil {
				cat.idErr = map[string]error{}
			}
			cat.idErr[ci.id] = err
			continue
		}
		cat.byKey[ci.id] = cat.byKey[cb.Name()]
	}
	return cat, nil
}

// reload switches the host to cfg (host.Host.Reload: unchanged callbacks
// keep their warm pools, a refused configuration changes nothing), then
// the bridge to a catalog of the new callbacks, published to C by
// publishInfos. A call that resolved a replaced callback from the old
// catalog in between is retried by do on the host's current one.
func (bh *bridgeHost) reload(ctx context.Context, cfg *config.Config, publishInfos func(*catalog)) (host.ReloadResult, error) {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if err := bh.open(); err != nil {
		return host.ReloadResult{}, err
	}
	res, err := bh.h.Reload(ctx, cfg)
	if err != nil {
		return res, err
	}
	cat, err := newCatalog(bh.h)
	if err != nil {
		return res, err
	}
	publishInfos(cat)
	bh.retired = append(bh.retired, bh.cat.Swap(cat))
	bh.last.Store(nil)
	return res, nil
}

// catalogs are every catalog the bridge has published, the current one
// last (for close, which frees their C infos).
func (bh *bridgeHost) catalogs() []*catalog {
	return append(append([]*catalog(nil), bh.retired...), bh.cat.Load())
}

// resolve finds a callback by name or content id. key may point into C
// memory; the returned info holds Go copies. The callback resolved last is
// checked first: a program calling one callback in a loop compares one
// string instead of hashing it.
func (bh *bridgeHost) resolve(key string) (*cbInfo, error) {
	cat := bh.cat.Load()
	if ci := bh.last.Load(); ci != nil && ci.name == key && ci.cat == cat {
		return ci, nil
	}
	if ci, ok := cat.byKey[key]; ok {
		if ci.name == key {
			bh.last.Store(ci)
		}
		return ci, nil
	}
	key = strings.Clone(key)
	if err := cat.idErr[key]; err != nil {
		return nil, &keyedError{callback: key, err: err}
	}
	// Not in the catalog: the host's own error (an unknown name or id, in
	// its words), or, after a reload the catalog has not caught up with,
	// the host's callback.
	cb, err := bh.h.Lookup(key)
	if err != nil {
		return nil, &keyedError{callback: key, err: err}
	}
	if ci, ok := cat.byKey[cb.Name()]; ok {
		return ci, nil
	}
	// A reload has switched the host and not yet published its catalog:
	// an info of the callback for this call (its C info is published with
	// the catalog; callbox_callback_find waits for that).
	info := cb.Info()
	return &cbInfo{index: -1, name: info.Name, id: info.ID, signature: info.Signature.String(), engine: info.Engine,
		batching: info.Batching, sig: info.Signature, cb: cb}, nil
}

// open fails once the host is closed. Calls check only this: the host
// itself refuses calls after Close (host.ErrClosed) and waits for those in
// flight, so they need no tracking here.
func (bh *bridgeHost) open() error {
	if bh.closed.Load() {
		return bh.closedError()
	}
	return nil
}

// enter marks a use of the host's C-side data (callback infos) in flight;
// it fails once the host is closed, and close waits for it.
func (bh *bridgeHost) enter() error {
	bh.calls.Add(1)
	if bh.closed.Load() {
		bh.calls.Done()
		return bh.closedError()
	}
	return nil
}

func (bh *bridgeHost) leave() { bh.calls.Done() }

func (bh *bridgeHost) closedError() error { return host.ErrClosed }

// close closes the host once; later calls fail. It waits for the bridge's
// calls in flight before returning, so C-side data can then be freed.
func (bh *bridgeHost) close(ctx context.Context) (first bool, err error) {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if bh.closed.Swap(true) {
		return false, nil
	}
	bh.calls.Wait()
	err = bh.h.Close(ctx)
	// The GPU path after the host: the host's discarded instances unpin
	// through it as it closes.
	if gerr := bh.gpu.Close(); gerr != nil && err == nil {
		err = fmt.Errorf("closing the GPU path: %w", gerr)
	}
	retire(bh)
	return true, err
}

// retire replaces a closed host's slot in the handle table with a
// tombstone that only says "closed", so that nothing the process keeps
// references the host: its callbacks, compiled modules and pools are
// garbage once the calls that raced the close have returned. A handle
// costs the table one small struct for the life of the process.
func retire(bh *bridgeHost) {
	tomb := &bridgeHost{handle: bh.handle}
	tomb.closed.Store(true)
	handles.mu.Lock()
	defer handles.mu.Unlock()
	cur := *handles.tab.Load()
	next := append([]*bridgeHost(nil), cur...)
	next[bh.handle-1] = tomb
	handles.tab.Store(&next)
}

// outputTypes derives a call's result types from its input types.
func (bh *bridgeHost) outputTypes(ci *cbInfo, in []abi.Tensor) ([]abi.OutputSpec, error) {
	metas := make([]abi.TensorMeta, len(in))
	for i, t := range in {
		metas[i] = abi.TensorMeta{DType: t.DType, Shape: t.Shape}
	}
	specs, err := ci.sig.Bind(metas)
	if err != nil {
		// The host's refusal of a call with these inputs, in its words:
		// callers derive outputs to make exactly that call.
		return nil, ci.cb.Refuse(err)
	}
	return specs, nil
}

// do runs one call of the C API or the XLA handlers: the request the C
// arguments describe (a chain's next step when chain is not "", batched
// when batch is set, under budget when it is positive), run by the host's
// one method, host.Callback.Do, which owns every check and derived fact.
// The outputs are always the caller's: the host checks them against the
// types the signature derives and writes the results straight into them.
// A chain's call is synchronous and keeps no reference to in or out,
// which may be C or XLA memory.
func (bh *bridgeHost) do(ctx context.Context, chain, callback string, in, out []abi.Tensor, batch bool, budget time.Duration) error {
	ci, err := bh.resolve(callback)
	if err != nil {
		return err
	}
	return bh.doOn(ctx, ci, chain, in, out, batch, budget)
}

// doOn is do on a resolved callback.
func (bh *bridgeHost) doOn(ctx context.Context, ci *cbInfo, chain string, in, out []abi.Tensor, batch bool, budget time.Duration) error {
	if out == nil {
		out = []abi.Tensor{} // given, and empty: never "allocate them"
	}
	// Field by field: a composite literal is built aside and copied whole,
	// which stalled on store forwarding (the largest item of doOn in a
	// profile).
	var req host.Request
	req.Inputs, req.Outputs, req.Batch, req.Budget, req.Chain = in, out, batch, budget, chain
	_, err := ci.cb.Do(ctx, &req)
	if errors.Is(err, host.ErrReplaced) {
		// A reload replaced the callback after we resolved it; the call
		// never ran. Run it on the version the host serves now, by name:
		// the host looks it up and admits the call in one step, so no
		// later reload can replace it in between.
		req.Callback = ci.name
		_, err = bh.h.Do(ctx, &req)
	}
	return err
}

// callSetup is the start callbox_call, callbox_tap and their chain forms
// share: the host, not closed (the host itself tracks calls, so they need
// no enter/leave), the callback name, and the chain name ("" for none;
// an empty one is refused). Names are viewed in C memory, not copied.
func callSetup(h uint64, chain, callback *byte) (bh *bridgeHost, name, chainName string, err error) {
	if bh, err = lookupHost(h); err != nil {
		return nil, "", "", err
	}
	if err = bh.open(); err != nil {
		return nil, "", "", err
	}
	if name, err = cString(callback, "callback"); err != nil {
		return nil, "", "", err
	}
	if chain != nil {
		if chainName, err = cString(chain, "chain"); err != nil {
			return nil, "", "", err
		}
		if chainName == "" {
			return nil, "", "", badArg(arg("chain"), "empty name")
		}
	}
	return bh, name, chainName, nil
}

// callDL is a call of the C API (callbox_call, or callbox_chain_call when
// chain is not nil) with its arguments as they come from C: NUL-terminated
// names and arrays of DLPack tensors, viewed in place, never copied.
func callDL(ctx context.Context, h uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) error {
	return dlCall(ctx, h, chain, callback, inputs, nIn, outputs, nOut, false, 0)
}

// callWithin is callbox_call_within: an unordered call that gives up when
// budgetNs of wall time pass before it is over. It reports gaveUp (and no
// error) when the budget ran out first; the host wrote nothing then. The
// budget rides on the call itself (host.Request.Budget, whose bounds are
// the host's), not on a context: no timer, no clock read or allocation of its own (a
// context.WithTimeout cost about 600 ns a call, measured with bench.c's
// within mode; a context carrying only a deadline, about 140 ns).
func callWithin(parent context.Context, budgetNs, h uint64, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) (gaveUp bool, err error) {
	if budgetNs == 0 {
		return false, badArg(arg("budget_ns"), "0: callbox_call_within needs a budget; callbox_call_cancelable has none")
	}
	budget := time.Duration(min(budgetNs, math.MaxInt64)) // past the host's bound either way
	err = dlCall(parent, h, nil, callback, inputs, nIn, outputs, nOut, false, budget)
	if err != nil && parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return true, nil
	}
	return false, err
}

// dlCall is callDL, callBatchDL (batch) or callWithin (budget > 0): the
// C API's arguments checked and viewed, then the call, the batched call or
// the call under its budget.
func dlCall(ctx context.Context, h uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr, batch bool, budget time.Duration) error {
	bh, name, chainName, err := callSetup(h, chain, callback)
	if err != nil {
		return err
	}
	ci, err := bh.resolve(name)
	if err != nil {
		return err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(uint64(nIn), uint64(nOut))
	in, err := fromDLs("input", inputs, nIn, sc.in[:])
	if err != nil {
		return ci.refused(err)
	}
	out, err := fromDLs("output", outputs, nOut, sc.out[:])
	if err != nil {
		return ci.refused(err)
	}
	return bh.doOn(ctx, ci, chainName, in, out, batch, budget)
}

// refused turns a tensor the bridge refused before the host could see it
// (fromDLs, xlaTensors: a NULL pointer, bad strides, device memory) into
// the host's refusal of the call (host.Callback.Refuse), worded as the
// host words its own: "argument i: ..." for an input, "output i: ..."
// for an output, whichever door's names the C side uses.
func (ci *cbInfo) refused(err error) error {
	var ae *argError
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case ae.arg.index >= 0 && (ae.arg.role == "input" || ae.arg.role == "argument"):
		return ci.cb.Refuse(&abi.ArgumentError{Index: ae.arg.index, Reason: ae.reason})
	case ae.arg.index >= 0 && (ae.arg.role == "output" || ae.arg.role == "result"):
		return ci.cb.Refuse(&abi.OutputError{Index: ae.arg.index, Reason: ae.reason})
	}
	return ci.cb.Refuse(err)
}

// tapDL is callbox_tap, or callbox_chain_tap when chain is not nil.
func tapDL(h uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr) error {
	bh, name, chainName, err := callSetup(h, chain, callback)
	if err != nil {
		return err
	}
	ci, err := bh.resolve(name)
	if err != nil {
		return err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(uint64(nIn), 0)
	in, err := fromDLs("input", inputs, nIn, sc.in[:])
	if err != nil {
		return ci.refused(err)
	}
	return bh.tap(context.Background(), chainName, name, in)
}

// cString views a NUL-terminated C string as a Go string without copying;
// what names the argument in errors. It scans in Go: a call to C's strlen
// would cost more than the scan.
func cString(p *byte, what string) (string, error) {
	if p == nil {
		return "", badArg(arg(what), "NULL")
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
		if n > maxString {
			return "", badArg(arg(what), "longer than %d bytes", maxString)
		}
	}
	return unsafe.String(p, n), nil
}

// maxString bounds names passed in (callback, chain, format).
const maxString = 1 << 16

// scratch holds one call's tensor slices, reused across calls.
type scratch struct {
	in, out [8]abi.Tensor
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// release clears what a call used and returns s to the pool. The counts
// are the caller's, untrusted (SIZE_MAX from C, a negative int64 from XLA
// as uint64): each is clamped to the scratch arrays.
func (s *scratch) release(nIn, nOut uint64) {
	clear(s.in[:min(nIn, uint64(len(s.in)))])
	clear(s.out[:min(nOut, uint64(len(s.out)))])
	scratchPool.Put(s)
}

// tap queues a side-effect call (on a chain when chain is not ""), with
// inputs copied, since they are read after the C call returns. Input types
// are checked now: a bad tap fails here, not at the next barrier.
func (bh *bridgeHost) tap(ctx context.Context, chain, callback string, in []abi.Tensor) error {
	ci, err := bh.resolve(callback)
	if err != nil {
		return err
	}
	if _, err := bh.outputTypes(ci, in); err != nil {
		return err
	}
	owned := make([]abi.Tensor, len(in))
	for i, t := range in {
		owned[i] = cloneTensor(t)
	}
	if chain == "" {
		bh.h.Tap(ctx, ci.name, owned...)
		return nil
	}
	bh.h.Chain(chain).Tap(ctx, ci.name, owned...)
	return nil
}

// chainBarrier waits for the named chain's queued calls and taps and
// returns its first failure.
func (bh *bridgeHost) chainBarrier(ctx context.Context, chain string) error {
	return bh.h.Chain(chain).Barrier(ctx)
}

// chainReset waits for the chain's queued calls and taps, then clears its
// failure so that later calls run again. The failure is what reset
// discards; only a wait cut short is an error.
func (bh *bridgeHost) chainReset(ctx context.Context, chain string) error {
	ch := bh.h.Chain(chain)
	if err := ch.Barrier(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	_ = ch.Reset()
	return nil
}

// The handle table: process-wide, copy-on-write, indexed by handle-1, so
// that a call finds its host with one atomic load and an index.
var handles struct {
	mu  sync.Mutex
	tab atomic.Pointer[[]*bridgeHost]
}

// register gives bh a handle.
func register(bh *bridgeHost) uint64 {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var next []*bridgeHost
	if cur := handles.tab.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, bh)
	bh.handle = uint64(len(next))
	handles.tab.Store(&next)
	return bh.handle
}

// lookupHost finds a host by handle. A closed host's slot holds a
// tombstone (retire), so that its handle keeps saying "closed".
func lookupHost(h uint64) (*bridgeHost, error) {
	if tab := handles.tab.Load(); tab != nil && h-1 < uint64(len(*tab)) {
		return (*tab)[h-1], nil
	}
	if h == 0 {
		return nil, badArg(arg("host"), "handle 0 is not a host (open one with callbox_open)")
	}
	return nil, badArg(arg("host"), "unknown host handle %d", h)
}

// The default host: the one host of the process the entries without a
// handle serve (both XLA handlers, callbox_cuda_call_dlpack,
// callbox_cuda_stats). XLA's handler ABI carries no user data, so it is
// process-wide, beside the handle table; nothing else in callbox is.
var defaultHost struct {
	mu sync.Mutex
	h  atomic.Uint64
}

// setDefault makes h (0: none) the default host.
func setDefault(h uint64) error {
	if h != 0 {
		if _, err := lookupHost(h); err != nil {
			return err
		}
	}
	defaultHost.mu.Lock()
	defer defaultHost.mu.Unlock()
	defaultHost.h.Store(h)
	return nil
}

// getDefault returns the default host, opening it from CALLBOX_CONFIG on
// first use.
func getDefault(ctx context.Context) (*bridgeHost, error) {
	if h := defaultHost.h.Load(); h != 0 {
		return lookupHost(h)
	}
	defaultHost.mu.Lock()
	defer defaultHost.mu.Unlock()
	if h := defaultHost.h.Load(); h != 0 {
		return lookupHost(h)
	}
	path := getenv("CALLBOX_CONFIG")
	if path == "" {
		return nil, &bridgeError{kind: abi.FailedPrecondition,
			msg: "no callbox host: set CALLBOX_CONFIG to a config file, or call callbox_set_default_host before the first call"}
	}
	cfg, err := configfile.LoadEnv(path, environ())
	if err != nil {
		return nil, fmt.Errorf("CALLBOX_CONFIG: %w", err)
	}
	bh, err := openHost(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("CALLBOX_CONFIG: %w", err)
	}
	defaultHost.h.Store(publish(bh))
	return bh, nil
}

// Cancel tokens: a C caller cancels calls through a token (a number, as
// handles are), since it cannot hold a Go context. Firing a token cancels
// the calls made with it that are in flight, and only those: a call made
// after it fires runs (so a token serves a whole session of Ctrl-Cs).
var cancels struct {
	mu   sync.Mutex
	m    map[uint64]*cancelToken
	next uint64
}

type cancelToken struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// newCancel makes a token and returns its number (never 0).
func newCancel() uint64 {
	t := &cancelToken{}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	cancels.mu.Lock()
	defer cancels.mu.Unlock()
	if cancels.m == nil {
		cancels.m = map[uint64]*cancelToken{}
	}
	cancels.next++
	cancels.m[cancels.next] = t
	return cancels.next
}

// lookupCancel finds a token; 0 is none (a nil token, whose context is
// Background).
func lookupCancel(id uint64) (*cancelToken, error) {
	if id == 0 {
		return nil, nil
	}
	cancels.mu.Lock()
	defer cancels.mu.Unlock()
	if t, ok := cancels.m[id]; ok {
		return t, nil
	}
	return nil, badArg(arg("cancel"), "unknown cancel token %d", id)
}

// context is the context of calls made with t now (nil t: Background).
func (t *cancelToken) context() context.Context {
	if t == nil {
		return context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctx
}

// fire cancels the calls in flight with t; later calls get a fresh context.
func (t *cancelToken) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancel()
	t.ctx, t.cancel = context.WithCancel(context.Background())
}

// freeCancel forgets a token, firing it first.
func freeCancel(id uint64) error {
	cancels.mu.Lock()
	t, ok := cancels.m[id]
	delete(cancels.m, id)
	cancels.mu.Unlock()
	if !ok {
		return badArg(arg("cancel"), "unknown cancel token %d", id)
	}
	t.fire()
	return nil
}
