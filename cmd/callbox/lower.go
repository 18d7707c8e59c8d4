package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/lowering"
)

func newLowerCmd() *cobra.Command {
	var (
		cfgPath string
		emit    string
		out     string
		opts    lowering.Options
	)
	cmd := &cobra.Command{
		Use:   "lower PROGRAM -c CONFIG [--emit stablehlo|ir] [-o FILE]",
		Short: "Compile a tensor program with callbacks to StableHLO (or print its IR after the passes)",
		Long: "lower parses PROGRAM (the text format of lowering/LOWERING.md), type-checks every callback\n" +
			"op against the signatures of CONFIG's callbacks, runs CSE, DCE and token threading, and\n" +
			"prints StableHLO whose custom calls name callbacks by content id (--emit ir: the IR after\n" +
			"the passes). Errors name the file, line and column.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if emit != "stablehlo" && emit != "ir" {
				return usageErr(fmt.Errorf("--emit %q: want stablehlo or ir", emit))
			}
			cfg, err := loadProgramConfig(cfgPath, "lower", "")
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cat, closeFn, err := catalogFor(ctx, cfg)
			if err != nil {
				return usageErr(err)
			}
			defer closeFn()
			prog, err := compileFile(args[0], cat, opts)
			if err != nil {
				return err
			}
			text := lowering.Print(prog)
			if emit == "stablehlo" {
				if text, err = lowering.Emit(prog, cat); err != nil {
					return err
				}
			}
			if out != "" {
				return os.WriteFile(out, []byte(text), 0o644)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file naming the callbacks (YAML, TOML or JSON)")
	cmd.Flags().StringVar(&emit, "emit", "stablehlo", "what to print: stablehlo, or ir (the IR after the passes)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&opts.NoCSE, "no-cse", false, "skip common-subexpression elimination")
	cmd.Flags().BoolVar(&opts.NoDCE, "no-dce", false, "skip dead-code elimination")
	return cmd
}

// loadProgramConfig loads the config of lower and exec; engine, when set,
// overrides every callback's engine.
func loadProgramConfig(path, command, engine string) (*config.Config, error) {
	if path == "" {
		return nil, usageErr(fmt.Errorf("%s: -c CONFIG is required", command))
	}
	cfg, err := configfile.Load(path)
	if err != nil {
		return nil, usageErr(err)
	}
	// The callbacks of modules entries, by name, as the host loads them.
	if cfg, err = host.ExpandModules(cfg); err != nil {
		return nil, usageErr(err)
	}
	if engine != "" {
		if engine != config.EngineWazero && engine != config.EngineWasmtime {
			return nil, usageErr(fmt.Errorf("--engine %q: want wazero or wasmtime", engine))
		}
		for i := range cfg.Callbacks {
			cfg.Callbacks[i].Engine = engine
		}
	}
	return cfg, nil
}

// catalogFor resolves the config's callbacks without a host when every
// signature is known statically, else by loading them.
func catalogFor(ctx context.Context, cfg *config.Config) (lowering.Catalog, func(), error) {
	if cat, err := lowering.ConfigCatalog(cfg); err == nil {
		return cat, func() {}, nil
	}
	h, err := host.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return lowering.HostCatalog(h), func() { _ = h.Close(ctx) }, nil
}

// compileFile reads and compiles a program; its errors are usage errors
// (they name the file, line and column).
func compileFile(path string, cat lowering.Catalog, opts lowering.Options) (*lowering.Program, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr(err)
	}
	prog, err := lowering.Compile(path, src, cat, opts)
	if err != nil {
		var le *lowering.Error
		if errors.As(err, &le) {
			return nil, usageErr(err)
		}
		return nil, err
	}
	return prog, nil
}
