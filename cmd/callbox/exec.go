package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/lowering"
)

func newExecCmd() *cobra.Command {
	var (
		cfgPath string
		ins     []string
		outs    []string
		engine  string
		trace   bool
		verbose bool
		opts    lowering.Options
	)
	cmd := &cobra.Command{
		Use:   "exec PROGRAM -c CONFIG --in X.npy [--in ...] --out Y.npy [--out ...]",
		Short: "Run a tensor program with callbacks on the host (the evaluator) and write its results as .npy",
		Long: "exec compiles PROGRAM like lower, then runs it with callbox's evaluator: Go kernels for the\n" +
			"basic ops, the config's sandboxed callbacks for call, io_call and tap, ordered effects on\n" +
			"host chains in program order. A failed callback fails the program (exit status 3) and\n" +
			"no later ordered call runs; no output file is written.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadProgramConfig(cfgPath, "exec", engine)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			inputs := make([]abi.Tensor, len(ins))
			for i, p := range ins {
				if inputs[i], err = tensorfile.ReadFile(p); err != nil {
					return usageErr(fmt.Errorf("--in %w", err))
				}
			}
			// Load only the callbacks the program calls: faster, and a
			// broken sibling in the same config does not stop it.
			if err := onlyCalled(cfg, args[0]); err != nil {
				return err
			}
			h, err := host.New(ctx, cfg, host.WithLogger(guestLogger(cmd.ErrOrStderr(), verbose)))
			if err != nil {
				return usageErr(err)
			}
			defer h.Close(ctx)
			prog, err := compileFile(args[0], lowering.HostCatalog(h), opts)
			if err != nil {
				return err
			}
			if len(inputs) != len(prog.Params()) {
				return usageErr(fmt.Errorf("%s: @%s takes %d inputs (%s), %d --in files were given", args[0], prog.Name, len(prog.Params()), paramTypes(prog), len(inputs)))
			}
			if len(outs) != len(prog.Results()) {
				return usageErr(fmt.Errorf("%s: @%s has %d results, %d --out files were given", args[0], prog.Name, len(prog.Results()), len(outs)))
			}
			var eo lowering.EvalOptions
			if trace {
				w := cmd.ErrOrStderr()
				eo.Trace = func(e lowering.Event) {
					kind := "io_call"
					if e.Tap {
						kind = "tap"
					}
					order := "unordered"
					if e.Ordered {
						order = "chain " + e.Chain
					}
					status := "ok"
					if e.Err != nil {
						status = "failed"
					}
					if e.Tap {
						status = "issued"
					}
					fmt.Fprintf(w, "effect: %s: %s @%s (%s): %s\n", e.Op.Pos, kind, e.Callback, order, status)
				}
			}
			ev, err := lowering.NewEvaluator(h, prog, eo)
			if err != nil {
				return usageErr(err)
			}
			results, err := ev.Run(ctx, inputs...)
			if err != nil {
				var ce *host.CallbackError
				if errors.As(err, &ce) {
					return callbackErr(err)
				}
				return usageErr(err)
			}
			for i, p := range outs {
				if err := tensorfile.WriteFile(p, results[i]); err != nil {
					return fmt.Errorf("--out %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file naming the callbacks (YAML, TOML or JSON)")
	cmd.Flags().StringArrayVar(&ins, "in", nil, "input .npy file, one per program parameter, in order")
	cmd.Flags().StringArrayVar(&outs, "out", nil, "output .npy file, one per program result, in order")
	cmd.Flags().StringVar(&engine, "engine", "", "run every callback on this engine (wazero or wasmtime), overriding the config")
	cmd.Flags().BoolVar(&trace, "trace", false, "print each side effect to stderr as it runs")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show guest debug log lines")
	cmd.Flags().BoolVar(&opts.NoCSE, "no-cse", false, "skip common-subexpression elimination")
	cmd.Flags().BoolVar(&opts.NoDCE, "no-dce", false, "skip dead-code elimination")
	return cmd
}

// onlyCalled keeps the config's callbacks the program names. A name the
// config lacks is left for the type checker to report with its position.
func onlyCalled(cfg *config.Config, path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return usageErr(err)
	}
	p, err := lowering.Parse(path, src)
	if err != nil {
		return usageErr(err)
	}
	called := map[string]bool{}
	p.Walk(func(op *lowering.Op) {
		if op.Callee != "" {
			called[op.Callee] = true
		}
	})
	kept := cfg.Callbacks[:0]
	for _, cb := range cfg.Callbacks {
		if called[cb.Name] {
			kept = append(kept, cb)
		}
	}
	cfg.Callbacks = kept
	return nil
}

func paramTypes(p *lowering.Program) string {
	s := make([]string, len(p.Params()))
	for i, v := range p.Params() {
		s[i] = v.Type.String()
	}
	return strings.Join(s, ", ")
}
