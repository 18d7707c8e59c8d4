package lowering

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// Callee is what lowering needs to know about a callback: its content id
// (abi.CallbackID) and its signature.
type Callee struct {
	Name      string
	ID        string
	Signature *abi.Signature
	// Ambiguous: other callbacks share ID under different settings, so
	// the host refuses a call by it (abi/ABI.md, section 7); the program
	// names this one by Name instead.
	Ambiguous bool
}

// Key is what names the callee in a lowered program: its content id, which
// any host with the same module resolves, or its name where the id is
// ambiguous.
func (c Callee) Key() string {
	if c.Ambiguous {
		return c.Name
	}
	return c.ID
}

// Catalog resolves callback names to callees.
type Catalog interface {
	Callee(name string) (Callee, bool)
	// Names lists the callbacks, sorted, for error messages.
	Names() []string
}

// StaticCatalog is a fixed name -> callee map.
type StaticCatalog map[string]Callee

// Callee implements Catalog.
func (c StaticCatalog) Callee(name string) (Callee, bool) {
	e, ok := c[name]
	return e, ok
}

// Names implements Catalog.
func (c StaticCatalog) Names() []string {
	out := make([]string, 0, len(c))
	for n := range c {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// HostCatalog is the catalog of a running host's loaded callbacks: ids and
// signatures as host.Info reports them.
func HostCatalog(h *host.Host) Catalog {
	c := StaticCatalog{}
	for _, info := range h.Callbacks() {
		_, err := h.Lookup(info.ID)
		c[info.Name] = Callee{Name: info.Name, ID: info.ID, Signature: info.Signature, Ambiguous: errors.Is(err, host.ErrAmbiguousID)}
	}
	return c
}

// ConfigCatalog builds the catalog from a config without starting a host:
// it reads every module, hashes it and takes the signature from the config
// or from the module's signature custom section. A callback whose signature
// is only available from the module's callbox_signatures export (which
// needs an instance to run) is an error: use HostCatalog for it. The
// callbacks of modules entries are included (host.ExpandModules).
func ConfigCatalog(cfg *config.Config) (Catalog, error) {
	cfg, err := host.ExpandModules(cfg)
	if err != nil {
		return nil, err
	}
	c := StaticCatalog{}
	specs := map[string]config.Callback{}
	for _, cb := range cfg.Callbacks {
		wasm, err := os.ReadFile(cb.Module)
		if err != nil {
			return nil, fmt.Errorf("callback %q: %w", cb.Name, err)
		}
		export := cb.Export
		if export == "" {
			export = cb.Name
		}
		info, err := sandbox.ParseModule(wasm)
		if err != nil {
			return nil, fmt.Errorf("callback %q: module %s: %w", cb.Name, cb.Module, err)
		}
		table, err := info.Signatures()
		if err != nil {
			return nil, fmt.Errorf("callback %q: module %s: %w", cb.Name, cb.Module, err)
		}
		cb.Export = export
		if cb.Signature == "" && table[export] == nil {
			return nil, fmt.Errorf("callback %q: module %s has no signature section and the config gives none; lower with a running host (HostCatalog)", cb.Name, cb.Module)
		}
		sig, err := cb.ResolveSignature(table[export])
		if err != nil {
			return nil, err
		}
		c[cb.Name] = Callee{Name: cb.Name, ID: abi.CallbackID(sha256.Sum256(wasm), export, sig), Signature: sig}
		specs[cb.Name] = cb
	}
	// An id shared under different settings is ambiguous, as the host
	// will find it.
	for n, a := range c {
		for m, b := range c {
			if n != m && a.ID == b.ID && !specs[n].SameSettings(specs[m]) {
				a.Ambiguous = true
				c[n] = a
			}
		}
	}
	return c, nil
}
