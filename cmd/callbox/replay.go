package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// exitDiffers is replay's status when the call's outcome differs from the
// recorded one.
const exitDiffers = 1

func newReplayCmd() *cobra.Command {
	var engine, isolation, module string
	cmd := &cobra.Command{
		Use:   "replay BUNDLE [--engine E] [--isolation I] [--module M.wasm]",
		Short: "Rerun a failed call from its replay bundle and say whether it ends the same way",
		Long: "Rerun the call a replay bundle recorded (a callback's record_failures) on a fresh instance, with the\n" +
			"module, settings and inputs the bundle holds, and compare its outcome (kind and message) with the\n" +
			"recorded one: exit status 0 when they match, 1 when they differ. --engine and --isolation run it\n" +
			"elsewhere; --module runs another build of the module (a fix) instead of the recorded one, whose\n" +
			"sha256 must match the bundle's.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, wasm, inputs, err := host.ReadBundle(args[0])
			if err != nil {
				return usageErr(fmt.Errorf("replay: %w", err))
			}
			if b.InputsOmitted != "" {
				return usageErr(fmt.Errorf("replay: %s: the bundle has no inputs (%s)", args[0], b.InputsOmitted))
			}
			file := filepath.Join(args[0], "module.wasm")
			if module != "" {
				if wasm, err = os.ReadFile(module); err != nil {
					return usageErr(fmt.Errorf("replay: --module %w", err))
				}
				file = module
			}
			cb := b.CallbackConfig(file)
			if engine != "" {
				cb.Engine = engine
			}
			if isolation != "" {
				cb.Isolation = isolation
			}
			if err := (&config.Config{Callbacks: []config.Callback{cb}}).Validate(); err != nil {
				return usageErr(fmt.Errorf("replay: %w", err))
			}
			h, err := host.New(ctx, nil, host.WithLogger(guestLogger(cmd.ErrOrStderr(), false)))
			if err != nil {
				return usageErr(err)
			}
			defer h.Close(ctx)
			if err := h.LoadModule(ctx, cb, wasm); err != nil {
				return usageErr(fmt.Errorf("replay: %w", err))
			}
			out := cmd.OutOrStdout()
			if b.CallsBefore > 0 {
				fmt.Fprintf(out, "note: the recorded call was its instance's call %d; the %d before it were not recorded, and this replay runs on a fresh instance\n",
					b.CallsBefore+1, b.CallsBefore)
			}
			recorded := fmt.Sprintf("%s: %s", b.Outcome.Kind, b.Outcome.Message)
			_, err = h.Invoke(ctx, cb.Name, inputs...)
			var ce *host.CallbackError
			switch {
			case err == nil:
				fmt.Fprintf(out, "replayed on %s (%s): the call succeeded; recorded: %s\n", cb.Engine, cb.Isolation, recorded)
				return &exitError{exitDiffers, errors.New("replay: the outcome differs from the recorded one")}
			case !errors.As(err, &ce):
				return err
			}
			got := fmt.Sprintf("%s: %s", ce.Kind().Ident(), ce.Message)
			if got != recorded {
				fmt.Fprintf(out, "replayed on %s (%s): %s; recorded: %s\n", cb.Engine, cb.Isolation, got, recorded)
				return &exitError{exitDiffers, errors.New("replay: the outcome differs from the recorded one")}
			}
			fmt.Fprintf(out, "replayed on %s (%s): the same outcome: %s\n", cb.Engine, cb.Isolation, got)
			if s := ce.FramesSummary(); s != "" {
				fmt.Fprintf(out, "  %s\n", s)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&engine, "engine", "", "run on this engine (wazero or wasmtime) instead of the recorded one")
	cmd.Flags().StringVar(&isolation, "isolation", "", "run under this isolation instead of the recorded one")
	cmd.Flags().StringVar(&module, "module", "", "run this module instead of the recorded one (a fix)")
	return cmd
}
