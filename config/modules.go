package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Module is one entry of a configuration's modules: a module whose every
// callback is loaded, one per signature it declares in its signature
// section (abi.SignatureSection), each named after its export. Settings
// apply to all of them; Overrides change single ones:
//
//	modules:
//	  kit:
//	    module: kit.wasm
//	    timeout: 2s
//	    callbacks:
//	      softmax: {timeout: 50ms}
//
// The callbacks exist only once a host (or host.ExpandModules) has read
// the module: this package reads no files. Module.Expand turns an entry
// and the module's signature table into Callbacks.
type Module struct {
	// Name is the entry's key, [a-z][a-z0-9_-]*; it names the entry in
	// messages and environment variables (CALLBOX_MODULES_<NAME>_<KEY>),
	// not a callback.
	Name string
	// Settings holds Module, SHA256 and the keys every callback of the
	// module starts from (the defaults' keys), with defaults applied.
	// Name, Export and Signature are unused.
	Settings Callback
	// Overrides are per-callback settings, by export name: Settings with
	// that callback's own keys applied. Each must name an export the
	// module declares a signature for.
	Overrides map[string]Callback
}

// EnvModulesPrefix starts the name of every environment variable that
// overrides a modules entry's key: CALLBOX_MODULES_<NAME>_<KEY>.
const EnvModulesPrefix = "CALLBOX_MODULES_"

// ModuleEnvPrefix is the prefix of a modules entry's environment
// variables, e.g. CALLBOX_MODULES_MY_KIT_ for my-kit.
func ModuleEnvPrefix(name string) string {
	return EnvModulesPrefix + envName(name) + "_"
}

// ModulePath is the key path of a modules entry in messages,
// modules.<name>, quoting a name that is not valid.
func ModulePath(name string) string {
	return "modules." + strings.TrimPrefix(CallbackPath(name), "callbacks.")
}

// ModuleNames checks modules entry names as CallbackNames checks callback
// names: valid, and distinct in the environment. The zero value is ready
// to use.
type ModuleNames struct {
	byEnv map[string]string
}

// Check reports whether name is valid and distinct, in the environment,
// from every name checked before it.
func (n *ModuleNames) Check(name string) error {
	if err := checkName(name); err != nil {
		return errors.New(strings.Replace(err.Error(), "bad callback name", "bad module entry name", 1))
	}
	if n.byEnv == nil {
		n.byEnv = map[string]string{}
	}
	e := envName(name)
	if other, ok := n.byEnv[e]; ok && other != name {
		return fmt.Errorf("module entries %s and %s both map to environment variables %s%s_*; rename one", other, name, EnvModulesPrefix, e)
	}
	n.byEnv[e] = name
	return nil
}

// ModuleKeys are the keys a modules entry may set besides callbacks (its
// per-callback overrides): module, sha256 and every key defaults may set.
func ModuleKeys() []Key {
	var out []Key
	for _, k := range Keys() {
		if !k.PerCallback || k.Name == "module" || k.Name == "sha256" {
			out = append(out, k)
		}
	}
	return out
}

// OverrideKeys are the keys of one callback under a modules entry's
// callbacks: those defaults may set (the signature and export come from
// the module).
func OverrideKeys() []Key {
	var out []Key
	for _, k := range Keys() {
		if !k.PerCallback {
			out = append(out, k)
		}
	}
	return out
}

// Expand is the callbacks of entry m, given table, the signature table of
// its module (export name to signature, as its signature section declares
// it; nil when it has none): one callback per entry of table, sorted by
// name, named after its export, from Settings or its override. file names
// the configuration in errors (*Error, with the entry's key path). A module
// without a signature section, an override naming an export the table
// lacks, and an export name that is not a valid callback name are errors.
func (m Module) Expand(file string, table map[string]*abi.Signature) ([]Callback, error) {
	path := ModulePath(m.Name)
	if len(table) == 0 {
		return nil, &Error{File: file, Key: path + ".module", Err: fmt.Errorf(
			"module %s declares no callbacks (it has no %s custom section), so a modules entry cannot load it: list each export under callbacks: with its signature", m.Settings.Module, abi.SignatureSection)}
	}
	exports := make([]string, 0, len(table))
	for e := range table {
		exports = append(exports, e)
	}
	slices.Sort(exports)
	var errs []error
	for _, name := range sortedNames(m.Overrides) {
		if _, ok := table[name]; !ok {
			errs = append(errs, &Error{File: file, Key: path + "." + CallbackPath(name), Err: fmt.Errorf(
				"module %s declares no signature for export %q (its %s section declares: %s); to load an export without one, give it its own callbacks entry with export: and signature:",
				m.Settings.Module, name, abi.SignatureSection, strings.Join(exports, ", "))})
		}
	}
	var out []Callback
	for _, e := range exports {
		if err := checkName(e); err != nil {
			errs = append(errs, &Error{File: file, Key: path + ".module", Err: fmt.Errorf(
				"module %s declares export %q, which is not a valid callback name (%v); load it with a callbacks entry of another name and export: %q", m.Settings.Module, e, err, e)})
			continue
		}
		cb, ok := m.Overrides[e]
		if !ok {
			cb = m.Settings
		}
		cb.Name, cb.Export, cb.Signature = e, e, ""
		cb.Module, cb.SHA256 = m.Settings.Module, m.Settings.SHA256
		out = append(out, cb)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ExpandModules is every callback of c: Callbacks and, for each entry of
// Modules, the callbacks Module.Expand gives with the table signatures
// returns for it (the module's signature section; the caller reads the
// file). The result is sorted by name; a name defined twice (by two
// modules, or by a module and a callbacks entry) is an error naming both.
func (c *Config) ExpandModules(signatures func(Module) (map[string]*abi.Signature, error)) ([]Callback, error) {
	out := slices.Clone(c.Callbacks)
	from := map[string]string{} // callback name -> the key path that defines it
	for _, cb := range c.Callbacks {
		from[cb.Name] = CallbackPath(cb.Name)
	}
	var errs []error
	for _, m := range c.Modules {
		path := ModulePath(m.Name)
		table, err := signatures(m)
		if err != nil {
			errs = append(errs, &Error{File: c.File, Key: path + ".module", Err: err})
			continue
		}
		cbs, err := m.Expand(c.File, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, cb := range cbs {
			if other, dup := from[cb.Name]; dup {
				errs = append(errs, &Error{File: c.File, Key: path, Err: fmt.Errorf(
					"module %s declares callback %s, which %s defines too: a name is defined once (load one of them under another name, with a callbacks entry and export:)", m.Settings.Module, cb.Name, other)})
				continue
			}
			from[cb.Name] = path
			out = append(out, cb)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Callback) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// validateModules applies the keys' rules to every modules entry, as
// Validate does to callbacks.
func (c *Config) validateModules(add func(key string, err error)) {
	var names ModuleNames
	seen := map[string]bool{}
	module := ModuleKeys()
	override := OverrideKeys()
	for _, m := range c.Modules {
		path := ModulePath(m.Name)
		if err := names.Check(m.Name); err != nil {
			add(path, err)
		}
		if seen[m.Name] {
			add(path, errors.New("duplicate modules entry"))
		}
		seen[m.Name] = true
		for _, k := range module {
			if err := k.Check(&m.Settings); err != nil {
				add(path+"."+k.Name, err)
			}
		}
		for _, e := range sortedNames(m.Overrides) {
			p := path + "." + CallbackPath(e)
			if err := checkName(e); err != nil {
				add(p, err)
			}
			cb := m.Overrides[e]
			for _, k := range override {
				if err := k.Check(&cb); err != nil {
					add(p+"."+k.Name, err)
				}
			}
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
