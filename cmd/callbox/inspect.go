package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cmd/callbox/internal/termsafe"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

func newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect MODULE.wasm",
		Short: "Show a module's ABI version, callbacks and signatures, imports and memory",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wasm, err := os.ReadFile(args[0])
			if err != nil {
				return usageErr(err)
			}
			r, err := engines.Inspect(cmd.Context(), wasm)
			if err != nil {
				return usageErr(fmt.Errorf("%s: %w", args[0], err))
			}
			printReport(cmd.OutOrStdout(), args[0], r)
			if len(r.Problems) > 0 {
				return usageErr(fmt.Errorf("%s: %d problem(s); this module would not load", args[0], len(r.Problems)))
			}
			return nil
		},
	}
}

func printReport(w interface{ Write([]byte) (int, error) }, path string, r *engines.ModuleReport) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("module       %s", termsafe.Text(path))
	p("size         %d bytes", r.Size)
	p("sha256       %s", r.SHA256)
	if r.ABIVersion != 0 && r.Stubbed {
		p("abi version  %d (read with the imports the host does not provide stubbed out; see problems)", r.ABIVersion)
	} else if r.ABIVersion != 0 {
		p("abi version  %d", r.ABIVersion)
	} else {
		p("abi version  unknown")
	}
	if r.Memory != nil {
		max := "none declared"
		if r.Memory.HasMax {
			max = fmt.Sprintf("%d pages (%s)", r.Memory.Max, config.FormatSize(r.Memory.Max*abi.PageSize))
		}
		p("memory       min %d pages (%s), max %s", r.Memory.Min, config.FormatSize(r.Memory.Min*abi.PageSize), max)
	} else {
		p("memory       none")
	}
	src := r.SignatureSource
	if src == "" {
		src = "none (give signatures in the config)"
	}
	p("signatures   from %s", src)
	p("callbacks")
	if len(r.Callbacks) == 0 {
		p("  (none)")
	}
	for _, c := range r.Callbacks {
		sig := "(no signature)"
		if c.Signature != nil {
			sig = c.Signature.String()
		}
		p("  %-20s %s", termsafe.Text(c.Export), termsafe.Text(sig))
	}
	p("imports")
	if len(r.Imports) == 0 {
		p("  (none)")
	}
	for _, imp := range r.Imports {
		p("  %-40s %s", termsafe.Text(imp.Module+"."+imp.Name), imp.Type)
	}
	p("exports")
	for _, e := range r.Exports {
		p("  %-40s %s", termsafe.Text(e.Name), e.Type)
	}
	if len(r.Problems) > 0 {
		p("problems")
		for _, pr := range r.Problems {
			// Problems can quote guest text (export and import names):
			// escaped, on one line each.
			p("  - %s", termsafe.Text(pr))
		}
	}
}
