package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
)

// Replay bundles: a callback with record_failures set leaves, for every
// failed call, a directory RecordFailures/<callback>/<time>-<n>/ holding
// bundle.json (Bundle), module.wasm and the inputs as in<i>.npy, for
// `callbox replay` to rerun on any machine (no absolute path inside).
const (
	// BundleFormat is bundle.json's format version.
	BundleFormat = 1
	// MaxBundles is how many bundles a callback keeps; the oldest go first.
	MaxBundles = 16
	// MaxBundleInputs bounds the inputs one bundle holds: a call with more
	// is recorded without them (Bundle.InputsOmitted says why).
	MaxBundleInputs = 64 << 20
)

// Bundle is a replay bundle's bundle.json: what ran, on what, and how it
// ended.
type Bundle struct {
	Format        int           `json:"format"`
	Callback      string        `json:"callback"`
	ModuleSHA256  string        `json:"module_sha256"`
	Export        string        `json:"export"`
	Signature     string        `json:"signature"`
	Engine        string        `json:"engine"`
	Isolation     string        `json:"isolation"`
	WASI          string        `json:"wasi"`
	Deterministic bool          `json:"deterministic"`
	Limits        config.Limits `json:"limits"`
	// CallsBefore is how many calls the failed call's instance had served
	// before it (its state may depend on them; their inputs are not
	// recorded).
	CallsBefore uint64 `json:"calls_before"`
	// Inputs are the input files, in order; none when InputsOmitted says
	// why.
	Inputs        []string      `json:"inputs"`
	InputsOmitted string        `json:"inputs_omitted,omitempty"`
	Outcome       BundleOutcome `json:"outcome"`
}

// BundleOutcome is how the recorded call ended.
type BundleOutcome struct {
	Kind         string        `json:"kind"` // Kind.Ident: "Timeout", "Unreachable", ...
	Message      string        `json:"message"`
	GuestMessage string        `json:"guest_message,omitempty"`
	Frames       []Frame       `json:"frames,omitempty"`
	Fuel         uint64        `json:"fuel,omitempty"`
	FuelKnown    bool          `json:"fuel_known,omitempty"`
	Time         time.Duration `json:"time_ns"`
}

// Callback is the callback config the bundle ran under, for the module
// file module.
func (b *Bundle) CallbackConfig(module string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Module, cb.Export, cb.Signature = b.Callback, module, b.Export, b.Signature
	cb.Engine, cb.Isolation, cb.WASI, cb.Deterministic, cb.Limits = b.Engine, b.Isolation, b.WASI, b.Deterministic, b.Limits
	cb.MaxInstances = 1
	return cb
}

// ReadBundle reads the bundle in dir: its bundle.json, its module (which
// must have the sha256 the bundle names: a bundle whose module was
// changed is refused) and its inputs.
func ReadBundle(dir string) (*Bundle, []byte, []Tensor, error) {
	data, err := os.ReadFile(filepath.Join(dir, "bundle.json"))
	if err != nil {
		return nil, nil, nil, err
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, "bundle.json"), err)
	}
	if b.Format != BundleFormat {
		return nil, nil, nil, fmt.Errorf("%s: format %d; this callbox reads format %d", filepath.Join(dir, "bundle.json"), b.Format, BundleFormat)
	}
	wasm, err := os.ReadFile(filepath.Join(dir, "module.wasm"))
	if err != nil {
		return nil, nil, nil, err
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != b.ModuleSHA256 {
		return nil, nil, nil, fmt.Errorf("%s: its sha256 is %x, not the bundle's %s: the module was changed after the call was recorded",
			filepath.Join(dir, "module.wasm"), sum, b.ModuleSHA256)
	}
	var inputs []Tensor
	for _, name := range b.Inputs {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return nil, nil, nil, fmt.Errorf("%s: input %q is not a file of the bundle", filepath.Join(dir, "bundle.json"), name)
		}
		t, err := tensorfile.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, nil, err
		}
		inputs = append(inputs, t)
	}
	return &b, wasm, inputs, nil
}

// recorder writes a callback's replay bundles.
type recorder struct {
	dir  string // RecordFailures/<callback>
	wasm []byte
	mu   sync.Mutex
	n    uint64
}

// recorded reports whether a failure of kind k is one a bundle explains:
// the guest ran (not a refused call, an unknown callback, a closed host or
// an overloaded one).
func recorded(k Kind) bool {
	switch k {
	case InvalidArgument, UnknownCallback, FailedPrecondition, Overloaded:
		return false
	}
	return true
}

// record writes the bundle of a failed call. A bundle that cannot be
// written is logged, never the call's failure.
func (c *Callback) recordFailure(inputs []Tensor, e *CallbackError, st Stats, callsBefore uint64) {
	r := c.recorder
	if r == nil || !recorded(e.kind) {
		return
	}
	if err := r.write(c, inputs, e, st, callsBefore); err != nil {
		c.logger.Warn("callbox: could not record the failed call (record_failures)", "error", err)
	}
}

func (r *recorder) write(c *Callback, inputs []Tensor, e *CallbackError, st Stats, callsBefore uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return err
	}
	r.n++
	name := fmt.Sprintf("%s-%d", time.Now().UTC().Format("20060102T150405.000000000"), r.n)
	tmp, err := os.MkdirTemp(r.dir, ".writing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename; left only by a failure
	spec := c.spec
	b := Bundle{
		Format: BundleFormat, Callback: c.name, ModuleSHA256: c.sha, Export: spec.Export, Signature: c.sig.String(),
		Engine: spec.Engine, Isolation: spec.Isolation, WASI: spec.WASI, Deterministic: spec.Deterministic, Limits: spec.Limits,
		CallsBefore: callsBefore, Inputs: []string{},
		Outcome: BundleOutcome{Kind: e.kind.Ident(), Message: e.Message, GuestMessage: e.GuestMessage, Frames: e.Frames,
			Fuel: st.Fuel, FuelKnown: st.FuelKnown, Time: st.Guest},
	}
	var size uint64
	for _, t := range inputs {
		size += uint64(len(t.Data))
	}
	switch {
	case size > MaxBundleInputs:
		b.InputsOmitted = fmt.Sprintf("the inputs are %d bytes, over the %d a bundle holds", size, MaxBundleInputs)
	default:
		for i, t := range inputs {
			if err := tensorfile.Supports(t.DType); err != nil {
				b.Inputs, b.InputsOmitted = []string{}, fmt.Sprintf("input %d: %v", i, err)
				break
			}
			file := fmt.Sprintf("in%d.npy", i)
			if err := tensorfile.WriteFile(filepath.Join(tmp, file), t); err != nil {
				return err
			}
			b.Inputs = append(b.Inputs, file)
		}
	}
	data, err := json.MarshalIndent(&b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "bundle.json"), append(data, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "module.wasm"), r.wasm, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, name)); err != nil {
		return err
	}
	return r.prune()
}

// prune removes the oldest bundles past MaxBundles (names sort by time).
func (r *recorder) prune() error {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	var bundles []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			bundles = append(bundles, e.Name())
		}
	}
	slices.Sort(bundles)
	var errs []error
	for len(bundles) > MaxBundles {
		errs = append(errs, os.RemoveAll(filepath.Join(r.dir, bundles[0])))
		bundles = bundles[1:]
	}
	return errors.Join(errs...)
}
