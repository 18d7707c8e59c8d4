package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/ffi/include"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

func newVersionCmd() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version [--short]",
		Short: "Print the release, the guest ABI, the C API and the engines' versions",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if short {
				fmt.Fprintln(out, release.Version)
				return nil
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "callbox\t%s\n", release.Version)
			fmt.Fprintf(w, "guest ABI\tv%d\n", abi.Version)
			fmt.Fprintf(w, "C API\t%s\t(libcallbox built from this release)\n", include.Version())
			for _, m := range release.Engines() {
				fmt.Fprintf(w, "%s\t%s\t(%s)\n", m.Name, m.Version, m.Path)
			}
			fmt.Fprintf(w, "go\t%s\n", release.Go())
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "print the release version alone")
	return cmd
}
