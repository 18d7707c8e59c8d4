// Command callbox runs tensor callbacks in WebAssembly sandboxes.
//
//	callbox run -c config.yaml scale --in x.npy --in f.npy --out y.npy
//	callbox inspect module.wasm
//	callbox check -c config.yaml
//	callbox demo
//	callbox bench --write docs/PERFORMANCE.md
//
// Exit status: 0 on success, 2 for usage, config and input-file errors, 3
// when a callback fails (the one line on stderr names it and the kind), 1
// for anything else.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Exit statuses.
const (
	exitOK       = 0
	exitInternal = 1
	exitUsage    = 2
	exitCallback = 3
)

// exitError carries an exit status with the message to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error { return &exitError{exitUsage, err} }

// callbackErr is a failed call: its one line names the kind, whatever the
// message says (an ABI violation's message names what the guest did).
func callbackErr(err error) error {
	return &exitError{exitCallback, fmt.Errorf("%w (kind %s)", err, abi.KindOf(err).Ident())}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI with args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var xe *exitError
	code := exitInternal
	if errors.As(err, &xe) {
		code = xe.code
	} else if isUsage(err) {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "callbox: %v\n", err)
	return code
}

// isUsage recognises cobra's own argument and flag errors.
func isUsage(err error) bool {
	var flagErr *flagError
	return errors.As(err, &flagErr)
}

type flagError struct{ error }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "callbox",
		Short:         "Run untrusted tensor callbacks in WebAssembly sandboxes",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &flagError{err} })
	root.AddCommand(newRunCmd(), newInspectCmd(), newCheckCmd(), newDemoCmd(), newBenchCmd(), newNpyCmd())
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageErr(err)
		}
		return nil
	}
}
