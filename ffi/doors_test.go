//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
)

// The door-conformance table (issue 29): one list of requests, well-formed
// and malformed, run through every door — the Go API (host.Host.Do), the
// C API (callbox_request_run, from the C harness), the CPU XLA FFI
// handler (callbox_xla_ffi with frames the harness builds), Python
// (python/tests/test_doors.py, from python/tests/testdata/doors.json) and
// Elixir (elixir/test/doors_test.exs, from elixir/test/fixtures/doors.terms;
// TestDoorTableFile keeps both files current) — each door asserting the same
// kind, code and message as the Go API, and the same output bytes (all
// zero after a failure: no door writes a partial result). A door that
// cannot express a request (XLA has no budget; C and XLA cannot ask the
// library to allocate outputs; Go has no NULL pointer) skips it, as its
// Doors say, and so does Python for an input of another dtype: it
// converts arguments by NumPy's same_kind rule before the call (its own
// marshalling, documented), so its request is not the table's.

var updateDoors = flag.Bool("update-doors", false, "rewrite python/tests/testdata/doors.json from the Go door")

// doorConfig is the table's configuration; {dir} is where kit.wasm is,
// {scale} the Rust SDK's scale module (a modules entry, read through its
// signature section), {worker} the callbox-worker executable of the
// *_proc callbacks (isolation: process).
const doorConfig = `worker: {worker}
callbacks:
  copy:       {module: {dir}/kit.wasm, export: copy, signature: "(x: f32[n]) -> f32[n]", timeout: 2s}
  copy_same:  {module: {dir}/kit.wasm, export: copy, signature: "(x: f32[n]) -> f32[n]", timeout: 3s}
  copy2:      {module: {dir}/kit.wasm, export: copy2, signature: "(x: s16[n], y: f32[m]) -> (s16[n], f32[m])"}
  fail:       {module: {dir}/kit.wasm, export: fail, signature: "(x: f32[n]) -> f32[n]"}
  spin:       {module: {dir}/kit.wasm, export: spin, signature: "(x: f32[n]) -> f32[n]", timeout: 100ms}
  nonneg:     {module: {dir}/kit.wasm, export: nonneg, signature: "(x: f32[n]) -> f32[n]", batching: parallel, max_instances: 2}
  tiny_out:   {module: {dir}/kit.wasm, export: copy, signature: "(x: f32[n]) -> f32[n]", max_output: 8B}
  wide_stack: {module: {dir}/kit.wasm, export: copy, signature: "(x: f32[n]) -> f32[n]", engine: wasmtime, max_stack: 64MiB}
  copy_proc:  {module: {dir}/kit.wasm, export: copy, signature: "(x: f32[n]) -> f32[n]", isolation: process}
  fail_proc:  {module: {dir}/kit.wasm, export: fail, signature: "(x: f32[n]) -> f32[n]", isolation: process, engine: wasmtime}
  spin_proc:  {module: {dir}/kit.wasm, export: spin, signature: "(x: f32[n]) -> f32[n]", timeout: 100ms, isolation: process}
modules:
  rust: {module: {scale}, batching: parallel}
`

// doorTensor is one tensor of a request: dtype, dims (nil: a scalar),
// and its data: "seq" (element i is i), "neg@K" (seq with element K
// negative), "null" (no data: a NULL pointer in C, nil in Go).
type doorTensor struct {
	DType string  `json:"dtype"`
	Dims  []int64 `json:"dims"`
	Fill  string  `json:"fill"`
}

// doorCase is one request of the table. Callback "@id:NAME" is NAME's
// content id; "@closed" is copy on a host that was closed. Outs nil asks
// the door to allocate the results. Doors lists the doors that run it:
// g (Go), c (C API), x (XLA handler), p (Python), e (Elixir: its calls
// allocate their results, so it runs the requests whose outputs are the
// ones the signature derives, and does no batches). Kind is the kind the Go
// door must give ("OK" for success), a check of the table itself.
type doorCase struct {
	ID       string       `json:"id"`
	Callback string       `json:"callback"`
	Chain    string       `json:"chain,omitempty"`
	Batch    bool         `json:"batch,omitempty"`
	BudgetNs uint64       `json:"budget_ns,omitempty"`
	Ins      []doorTensor `json:"inputs"`
	Outs     []doorTensor `json:"outputs"`
	Doors    string       `json:"doors"`
	Kind     string       `json:"-"`
}

func f32(fill string, dims ...int64) doorTensor { return doorTensor{"f32", dims, fill} }
func tns(dtype, fill string, dims ...int64) doorTensor {
	return doorTensor{dtype, dims, fill}
}

func ins(ts ...doorTensor) []doorTensor  { return append([]doorTensor{}, ts...) }
func outs(ts ...doorTensor) []doorTensor { return append([]doorTensor{}, ts...) }

const all = "gcxp"

var doorCases = []doorCase{
	{ID: "ok", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "OK"},
	{ID: "ok_alloc", Callback: "copy", Ins: ins(f32("seq", 4)), Doors: "gpe", Kind: "OK"},
	{ID: "ok_empty", Callback: "copy", Ins: ins(f32("seq", 0)), Outs: outs(f32("", 0)), Doors: "gcxpe", Kind: "OK"},
	{ID: "ok_two", Callback: "copy2", Ins: ins(tns("s16", "seq", 3), f32("seq", 2)), Outs: outs(tns("s16", "", 3), f32("", 2)), Doors: "gcxpe", Kind: "OK"},
	{ID: "ok_by_id", Callback: "@id:copy2", Ins: ins(tns("s16", "seq", 3), f32("seq", 2)), Outs: outs(tns("s16", "", 3), f32("", 2)), Doors: "gcxpe", Kind: "OK"},
	{ID: "in_dtype", Callback: "copy", Ins: ins(tns("f64", "seq", 4)), Outs: outs(f32("", 4)), Doors: "gcx", Kind: "InvalidArgument"},
	{ID: "in_rank", Callback: "copy", Ins: ins(f32("seq", 2, 2)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "in_scalar", Callback: "copy", Ins: ins(f32("seq")), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "in_none", Callback: "copy", Ins: ins(), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "in_extra", Callback: "copy", Ins: ins(f32("seq", 4), f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "in_swapped", Callback: "copy2", Ins: ins(f32("seq", 2), tns("s16", "seq", 3)), Outs: outs(tns("s16", "", 3), f32("", 2)), Doors: "gcx", Kind: "InvalidArgument"},
	{ID: "in_pred", Callback: "copy", Ins: ins(tns("pred", "seq", 4)), Outs: outs(f32("", 4)), Doors: "gcx", Kind: "InvalidArgument"},
	{ID: "in_null_data", Callback: "copy", Ins: ins(f32("null", 4)), Outs: outs(f32("", 4)), Doors: "cx", Kind: "InvalidArgument"},
	{ID: "out_null_data", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("null", 4)), Doors: "cx", Kind: "InvalidArgument"},
	{ID: "in_negative_dim", Callback: "copy", Ins: ins(f32("null", -1)), Outs: outs(f32("", 4)), Doors: "cx", Kind: "InvalidArgument"},
	{ID: "in_rank_33", Callback: "copy", Ins: ins(f32("seq", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)), Outs: outs(f32("", 1)), Doors: "gcx", Kind: "InvalidArgument"},
	{ID: "out_dtype", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(tns("f64", "", 4)), Doors: all, Kind: "InvalidArgument"},
	{ID: "out_shape", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 3)), Doors: all, Kind: "InvalidArgument"},
	{ID: "out_rank", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 2, 2)), Doors: all, Kind: "InvalidArgument"},
	{ID: "out_none", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(), Doors: all, Kind: "InvalidArgument"},
	{ID: "out_extra", Callback: "copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4), f32("", 4)), Doors: all, Kind: "InvalidArgument"},
	{ID: "unknown", Callback: "nope", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "UnknownCallback"},
	{ID: "unknown_id", Callback: "cb1-" + strings.Repeat("0", 64), Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "UnknownCallback"},
	{ID: "ambiguous_id", Callback: "@id:copy", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "guest_error", Callback: "fail", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "GuestError"},
	{ID: "timeout", Callback: "spin", Ins: ins(f32("seq", 1)), Outs: outs(f32("", 1)), Doors: "gcxpe", Kind: "Timeout"},
	{ID: "proc_ok", Callback: "copy_proc", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "OK"},
	{ID: "proc_guest_error", Callback: "fail_proc", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "GuestError"},
	{ID: "proc_timeout", Callback: "spin_proc", Ins: ins(f32("seq", 1)), Outs: outs(f32("", 1)), Doors: "gcxpe", Kind: "Timeout"},
	{ID: "budget_ok", Callback: "copy", BudgetNs: uint64(time.Second), Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gc", Kind: "OK"},
	{ID: "budget_spin", Callback: "spin", BudgetNs: uint64(20 * time.Millisecond), Ins: ins(f32("seq", 1)), Outs: outs(f32("", 1)), Doors: "gc", Kind: "Timeout"},
	{ID: "budget_huge", Callback: "copy", BudgetNs: uint64(2 * time.Hour), Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gc", Kind: "InvalidArgument"},
	{ID: "batch_ok", Callback: "nonneg", Batch: true, Ins: ins(f32("seq", 3, 4)), Outs: outs(f32("", 3, 4)), Doors: all, Kind: "OK"},
	{ID: "batch_alloc", Callback: "nonneg", Batch: true, Ins: ins(f32("seq", 3, 4)), Doors: "gp", Kind: "OK"},
	{ID: "batch_element", Callback: "nonneg", Batch: true, Ins: ins(f32("neg@4", 3, 4)), Outs: outs(f32("", 3, 4)), Doors: all, Kind: "GuestError"},
	{ID: "batch_sizes", Callback: "copy2", Batch: true, Ins: ins(tns("s16", "seq", 2, 3), f32("seq", 3, 2)), Outs: outs(tns("s16", "", 2, 3), f32("", 2, 2)), Doors: all, Kind: "InvalidArgument"},
	{ID: "batch_scalar", Callback: "nonneg", Batch: true, Ins: ins(f32("seq")), Outs: outs(f32("")), Doors: all, Kind: "InvalidArgument"},
	{ID: "batch_out_shape", Callback: "nonneg", Batch: true, Ins: ins(f32("seq", 3, 4)), Outs: outs(f32("", 2, 4)), Doors: all, Kind: "InvalidArgument"},
	{ID: "batch_budget", Callback: "nonneg", Batch: true, BudgetNs: uint64(time.Second), Ins: ins(f32("seq", 3, 4)), Outs: outs(f32("", 3, 4)), Doors: "gc", Kind: "InvalidArgument"},
	{ID: "batch_empty", Callback: "nonneg", Batch: true, Ins: ins(f32("seq", 0, 4)), Outs: outs(f32("", 0, 4)), Doors: all, Kind: "OK"},
	{ID: "modules_call", Callback: "scale", Ins: ins(f32("seq", 3), f32("seq")), Outs: outs(f32("", 3)), Doors: "gcxpe", Kind: "OK"},
	{ID: "modules_batch", Callback: "scale", Batch: true, Ins: ins(f32("seq", 2, 3), f32("seq", 2)), Outs: outs(f32("", 2, 3)), Doors: all, Kind: "OK"},
	{ID: "max_output", Callback: "tiny_out", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "InvalidArgument"},
	{ID: "wide_stack", Callback: "wide_stack", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "OK"},
	{ID: "chain_ok", Callback: "copy", Chain: "k1", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "OK"},
	{ID: "chain_guest_error", Callback: "fail", Chain: "k2", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "GuestError"},
	{ID: "chain_after_failure", Callback: "copy", Chain: "k2", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcxpe", Kind: "GuestError"},
	{ID: "chain_batch", Callback: "nonneg", Chain: "k3", Batch: true, Ins: ins(f32("seq", 2, 4)), Outs: outs(f32("", 2, 4)), Doors: all, Kind: "OK"},
	{ID: "closed", Callback: "@closed", Ins: ins(f32("seq", 4)), Outs: outs(f32("", 4)), Doors: "gcpe", Kind: "FailedPrecondition"},
}

// doorResult is what a door made of a case: the kind's ident ("OK" for
// success), the code, the message, and a hash of the output bytes.
type doorResult struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Outputs string `json:"outputs"`
}

// tensor builds the Go tensor of t.
func (t doorTensor) tensor() (abi.Tensor, error) {
	d, err := abi.ParseDType(t.DType)
	if err != nil {
		return abi.Tensor{}, err
	}
	shape := abi.Shape(append([]int64{}, t.Dims...))
	n := int64(1)
	for _, x := range shape {
		n *= x
	}
	if t.Fill == "null" || n < 0 || len(shape) > abi.MaxRank {
		return abi.Tensor{DType: d, Shape: shape}, nil
	}
	data := make([]byte, n*int64(d.Size()))
	if t.Fill != "" {
		neg := int64(-1)
		if _, err := fmt.Sscanf(t.Fill, "neg@%d", &neg); err != nil {
			neg = -1
		}
		for i := int64(0); i < n; i++ {
			putElement(data, d, i, i, i == neg)
		}
	}
	return abi.Tensor{DType: d, Shape: shape, Data: data}, nil
}

// putElement writes element i as the number v (negated when neg), the
// table's fill rule, which harness.c's door group repeats.
func putElement(data []byte, d abi.DType, i, v int64, neg bool) {
	if neg {
		v = -1
	}
	switch d {
	case abi.F32:
		abi.MustView[float32](abi.Tensor{DType: d, Data: data})[i] = float32(v)
	case abi.F64:
		abi.MustView[float64](abi.Tensor{DType: d, Data: data})[i] = float64(v)
	case abi.S16:
		abi.MustView[int16](abi.Tensor{DType: d, Data: data})[i] = int16(v)
	case abi.PRED:
		data[i] = byte(v & 1)
	}
}

// outputHash hashes the output tensors' bytes (FNV-1a 64, as harness.c).
func outputHash(ts []abi.Tensor) string {
	h := fnv.New64a()
	for _, t := range ts {
		h.Write(t.Data)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// doorFiles writes the table's modules and configuration into dir.
func doorFiles(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile("testdata/kit.wat")
	require.NoError(t, err)
	bin, err := wat.Compile(string(src))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kit.wasm"), bin, 0o644))
	scale, err := filepath.Abs("../guests/prebuilt/rust-scale.wasm")
	require.NoError(t, err)
	worker, err := workerbin.Path(false)
	require.NoError(t, err)
	text := strings.NewReplacer("{dir}", dir, "{scale}", scale, "{worker}", worker).Replace(doorConfig)
	path := filepath.Join(dir, "doors.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// goDoor runs every case the Go door runs through host.Host.Do.
func goDoor(t *testing.T, cfgPath string) map[string]doorResult {
	t.Helper()
	ctx := context.Background()
	cfg, err := configfile.Load(cfgPath)
	require.NoError(t, err)
	h, err := host.New(ctx, cfg, host.WithLogger(bridgeLogger()))
	require.NoError(t, err)
	defer h.Close(ctx)
	closed, err := host.New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, closed.Close(ctx))
	res := map[string]doorResult{}
	for _, c := range doorCases {
		if !strings.Contains(c.Doors, "g") {
			continue
		}
		req := host.Request{Callback: c.Callback, Chain: c.Chain, Batch: c.Batch, Budget: time.Duration(c.BudgetNs)}
		on := h
		switch {
		case c.Callback == "@closed":
			on, req.Callback = closed, "copy"
		case strings.HasPrefix(c.Callback, "@id:"):
			info, ok := h.Callback(strings.TrimPrefix(c.Callback, "@id:"))
			require.True(t, ok, c.ID)
			req.Callback = info.ID
		}
		for _, dt := range c.Ins {
			x, err := dt.tensor()
			require.NoError(t, err, c.ID)
			req.Inputs = append(req.Inputs, x)
		}
		if c.Outs != nil {
			req.Outputs = []abi.Tensor{}
			for _, dt := range c.Outs {
				y, err := dt.tensor()
				require.NoError(t, err, c.ID)
				req.Outputs = append(req.Outputs, y)
			}
		}
		_, err := on.Do(ctx, &req)
		r := doorResult{Kind: "OK", Outputs: outputHash(req.Outputs)}
		if err != nil {
			info := describe(err)
			r = doorResult{Kind: info.kind.Ident(), Code: int(info.code), Message: err.Error(), Outputs: r.Outputs}
		}
		assert.Equal(t, c.Kind, r.Kind, "%s: the Go door's kind (%s)", c.ID, r.Message)
		res[c.ID] = r
	}
	return res
}

// doorFileLine is a case as harness.c's door group reads it, one line of
// tab-separated fields: id, callback, chain ("-": none), batch (0 or 1),
// budget_ns, doors, the inputs' count and each input, then the outputs'
// count (-1: allocate) and each output; a tensor is "xla,dlcode,dlbits,
// esize,rank,fill,neg,d0,d1,...", fill 0 for seq, 1 for null, 2 for zeros.
func doorFileLine(c doorCase) string {
	tensor := func(t doorTensor) string {
		d, _ := abi.ParseDType(t.DType)
		dl := dlpack.FromABI(d)
		fill, neg := 0, -1
		switch {
		case t.Fill == "null":
			fill = 1
		case t.Fill == "":
			fill = 2
		default:
			fmt.Sscanf(t.Fill, "neg@%d", &neg)
		}
		f := []string{fmt.Sprint(int(d)), fmt.Sprint(dl.Code), fmt.Sprint(dl.Bits), fmt.Sprint(d.Size()), fmt.Sprint(len(t.Dims)), fmt.Sprint(fill), fmt.Sprint(neg)}
		for _, x := range t.Dims {
			f = append(f, fmt.Sprint(x))
		}
		return strings.Join(f, ",")
	}
	chain := c.Chain
	if chain == "" {
		chain = "-"
	}
	batch := 0
	if c.Batch {
		batch = 1
	}
	f := []string{c.ID, c.Callback, chain, fmt.Sprint(batch), fmt.Sprint(c.BudgetNs), c.Doors, fmt.Sprint(len(c.Ins))}
	for _, x := range c.Ins {
		f = append(f, tensor(x))
	}
	if c.Outs == nil {
		f = append(f, "-1")
	} else {
		f = append(f, fmt.Sprint(len(c.Outs)))
		for _, y := range c.Outs {
			f = append(f, tensor(y))
		}
	}
	return strings.Join(f, "\t")
}

// TestDoorConformance runs the table through the Go API, the C API and
// the XLA handler and asserts that every door gives the Go API's kind,
// code and message (the XLA handler: its code and message; XLA errors
// carry no kind) and the same output bytes.
func TestDoorConformance(t *testing.T) {
	require.GreaterOrEqual(t, len(doorCases), 40)
	dir := t.TempDir()
	cfgPath := doorFiles(t, dir)
	want := goDoor(t, cfgPath)

	var lines []string
	for _, c := range doorCases {
		lines = append(lines, doorFileLine(c))
	}
	casesPath := filepath.Join(dir, "doors.tsv")
	require.NoError(t, os.WriteFile(casesPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	r := runHarness(t, buildHarness(t), cfgPath, dir, []string{"CALLBOX_DOOR_CASES=" + casesPath}, "doors")

	ran := map[byte]int{}
	for _, c := range doorCases {
		w, ok := want[c.ID]
		if !ok {
			// Not a Go request (a NULL pointer has no Go form): the C API
			// is the reference the XLA handler must match.
			got := r.errs["door_c_"+c.ID]
			w = doorResult{Kind: got.kind, Code: got.code, Outputs: r.vals["door_c_"+c.ID]}
			w.Message = strings.TrimPrefix(got.text, got.kind+": ")
			assert.Equal(t, c.Kind, w.Kind, "%s: the C API's kind (%s)", c.ID, got.text)
		}
		if strings.Contains(c.Doors, "c") {
			got, ok := r.errs["door_c_"+c.ID]
			if assert.True(t, ok, "%s: no C API result", c.ID) {
				assert.Equal(t, w.Kind, got.kind, "%s: C API kind (%s)", c.ID, got.text)
				if w.Kind != "OK" {
					// callbox_error.text is "<kind>: <the Go error's text>".
					assert.Equal(t, w.Code, got.code, "%s: C API code", c.ID)
					assert.Equal(t, w.Kind+": "+w.Message, got.text, "%s: C API message", c.ID)
				}
				assert.Equal(t, w.Outputs, r.vals["door_c_"+c.ID], "%s: C API output bytes", c.ID)
				ran['c']++
			}
		}
		if strings.Contains(c.Doors, "x") {
			got, ok := r.xla["door_x_"+c.ID]
			if assert.True(t, ok, "%s: no XLA result", c.ID) {
				// An XLA error carries a code and a message, "callbox <kind>:
				// <the Go error's text> [callbox error <tag>-<n>]", and the
				// token gives back (callbox_xla_failure) the error the C API
				// gives: every field.
				assert.Equal(t, w.Code, got.code, "%s: XLA code (%s)", c.ID, got.text)
				if w.Kind != "OK" {
					assert.Equal(t, "callbox "+w.Kind+": "+w.Message+" "+tokenOf(t, got.text), got.text, "%s: XLA message", c.ID)
					failure, found := r.errs["door_xf_"+c.ID]
					if assert.True(t, found, "%s: callbox_xla_failure gave no failure (%s)", c.ID, r.vals["door_xf_"+c.ID]) {
						assert.Equal(t, r.errs["door_c_"+c.ID], failure, "%s: the XLA failure is the C API's error", c.ID)
					}
				}
				assert.Equal(t, w.Outputs, r.vals["door_x_"+c.ID], "%s: XLA output bytes", c.ID)
				ran['x']++
			}
		}
	}
	t.Logf("the table: %d requests; the C API ran %d, the XLA handler %d", len(doorCases), ran['c'], ran['x'])
	assert.Empty(t, r.failed, "harness checks")
}

// doorFile is python/tests/testdata/doors.json: the configuration, the
// cases and the Go door's results, which the Python door must reproduce.
type doorFile struct {
	Comment string                `json:"comment"`
	Config  string                `json:"config"`
	Cases   []doorCase            `json:"cases"`
	Want    map[string]doorResult `json:"want"`
}

const (
	doorFilePath      = "../python/tests/testdata/doors.json"
	doorTermsFilePath = "../elixir/test/fixtures/doors.terms"
)

// doorTerms is the table for the Elixir door as Erlang terms
// (:file.consult/1 reads them; Elixir 1.14 has no JSON): {config, Text},
// then {door, Id, Callback, Chain, Inputs, Want} for each case the Elixir
// door runs, Inputs [{DType, Dims, Fill}], Want {Kind, Code, Message,
// OutputHash}; every string a binary.
func doorTerms(want map[string]doorResult) string {
	bin := func(s string) string {
		var b strings.Builder
		b.WriteString(`<<"`)
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c >= 0x20 && c < 0x7f:
				b.WriteByte(c)
			default:
				fmt.Fprintf(&b, `\x{%02X}`, c)
			}
		}
		b.WriteString(`">>`)
		return b.String()
	}
	var b strings.Builder
	b.WriteString("%% The door-conformance table (ffi/doors_test.go) for elixir/test/doors_test.exs;\n")
	b.WriteString("%% rewritten by go test ./ffi -run TestDoorTableFile -update-doors.\n")
	fmt.Fprintf(&b, "{config, %s}.\n", bin(doorConfig))
	for _, c := range doorCases {
		if !strings.Contains(c.Doors, "e") {
			continue
		}
		var ins []string
		for _, t := range c.Ins {
			dims := make([]string, len(t.Dims))
			for i, d := range t.Dims {
				dims[i] = fmt.Sprint(d)
			}
			ins = append(ins, fmt.Sprintf("{%s, [%s], %s}", bin(t.DType), strings.Join(dims, ", "), bin(t.Fill)))
		}
		w := want[c.ID]
		fmt.Fprintf(&b, "{door, %s, %s, %s, [%s], {%s, %d, %s, %s}}.\n", bin(c.ID), bin(c.Callback), bin(c.Chain),
			strings.Join(ins, ", "), bin(w.Kind), w.Code, bin(w.Message), bin(w.Outputs))
	}
	return b.String()
}

// TestDoorTableFile: the table Python runs is this one, with the Go
// door's results (go test ./ffi -run TestDoorTableFile -update-doors
// rewrites it).
func TestDoorTableFile(t *testing.T) {
	dir := t.TempDir()
	want := goDoor(t, doorFiles(t, dir))
	for id, r := range want {
		// Paths in messages are the test's temporary directory: none of
		// the table's messages may carry one.
		require.NotContains(t, r.Message, dir, id)
	}
	f := doorFile{
		Comment: "The door-conformance table (ffi/doors_test.go): run by python/tests/test_doors.py; rewritten by go test ./ffi -run TestDoorTableFile -update-doors.",
		Config:  doorConfig, Cases: doorCases, Want: want,
	}
	b, err := json.MarshalIndent(f, "", " ")
	require.NoError(t, err)
	b = append(b, '\n')
	terms := doorTerms(want)
	if *updateDoors {
		require.NoError(t, os.WriteFile(doorFilePath, b, 0o644))
		require.NoError(t, os.MkdirAll(filepath.Dir(doorTermsFilePath), 0o755))
		require.NoError(t, os.WriteFile(doorTermsFilePath, []byte(terms), 0o644))
	}
	got, err := os.ReadFile(doorFilePath)
	require.NoError(t, err, "run go test ./ffi -run TestDoorTableFile -update-doors")
	assert.Equal(t, string(b), string(got), "python/tests/testdata/doors.json is stale: go test ./ffi -run TestDoorTableFile -update-doors")
	got, err = os.ReadFile(doorTermsFilePath)
	require.NoError(t, err, "run go test ./ffi -run TestDoorTableFile -update-doors")
	assert.Equal(t, terms, string(got), "elixir/test/fixtures/doors.terms is stale: go test ./ffi -run TestDoorTableFile -update-doors")
}
