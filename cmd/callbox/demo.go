package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the shipped example callbacks in an ordered chain and contain a hostile one",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("demo: not built yet")
		},
	}
}
