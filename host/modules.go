package host

import (
	"fmt"
	"os"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// ExpandModules returns a copy of cfg whose Callbacks hold every callback
// it defines: its callbacks entries and, for each modules entry, one
// callback per signature the module declares in its signature section
// (abi.SignatureSection), named after its export, with the entry's
// settings and per-callback overrides (config.Module.Expand); Modules is
// empty. It reads each module file (Load reads it again). New expands
// this way; a program that looks a callback up in the config itself
// (Config.Callback) expands first. A module without a signature section,
// or an override naming an export it declares no signature for, is an
// error naming the config file and key.
func ExpandModules(cfg *config.Config) (*config.Config, error) {
	callbacks, err := expandModules(cfg)
	if err != nil {
		return nil, err
	}
	out := *cfg
	out.Callbacks, out.Modules = callbacks, nil
	return &out, nil
}

func expandModules(cfg *config.Config) ([]config.Callback, error) {
	if len(cfg.Modules) == 0 {
		return cfg.Callbacks, nil
	}
	return cfg.ExpandModules(moduleSignatures)
}

// moduleSignatures reads the signature section of a modules entry's module.
func moduleSignatures(m config.Module) (map[string]*abi.Signature, error) {
	wasm, err := os.ReadFile(m.Settings.Module)
	if err != nil {
		return nil, err
	}
	info, err := sandbox.ParseModule(wasm)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.Settings.Module, err)
	}
	table, err := info.Signatures()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.Settings.Module, err)
	}
	if len(table) == 0 && info.HasExport(abi.ExportSignatures) {
		return nil, fmt.Errorf("module %s declares its signatures only through its %s export, which a modules entry does not run (it reads the %s custom section): list each export under callbacks:", m.Settings.Module, abi.ExportSignatures, abi.SignatureSection)
	}
	return table, nil
}
