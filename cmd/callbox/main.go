// Command callbox runs tensor callbacks in WebAssembly sandboxes.
//
//	callbox run -c config.yaml scale --in x.npy --in f.npy --out y.npy
//	callbox inspect module.wasm
//	callbox check -c config.yaml
//	callbox demo
//
// Exit status (README.md, "Exit status"):
//
//	0  success
//	1  an internal error: a bug in callbox (please report it)
//	2  usage, config, module or input-file errors, and a call refused
//	   before it ran (bad arguments, an --out path or dtype that cannot be
//	   written): nothing ran
//	3  the callback ran and failed (the one line on stderr names it and
//	   the kind)
//	4  the callback succeeded but an output file could not be written
//	   (disk full, permissions); no --out file is left half-written
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
	"github.com/seed4b3e0ccb/callbox/cmd/callbox/internal/termsafe"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// Exit statuses.
const (
	exitOK       = 0
	exitInternal = 1
	exitUsage    = 2
	exitCallback = 3
	exitOutput   = 4
)

// exitError carries an exit status with the message to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error  { return &exitError{exitUsage, err} }
func outputErr(err error) error { return &exitError{exitOutput, err} }

// callbackErr is a failed call: its one line names the kind, whatever the
// message says (an ABI violation's message names what the guest did).
// When the failure has more frames than its message shows, every frame
// follows on a line of its own.
func callbackErr(err error) error {
	line := fmt.Errorf("%w (kind %s)", err, abi.KindOf(err).Ident())
	var ce *host.CallbackError
	if !errors.As(err, &ce) || len(ce.Frames) <= sandbox.FramesInMessage {
		return &exitError{exitCallback, line}
	}
	lines := []error{line, errors.New("backtrace, innermost first:")}
	for i, f := range ce.Frames {
		lines = append(lines, fmt.Errorf("  #%d %s", i, f))
	}
	return &exitError{exitCallback, errors.Join(lines...)}
}

func main() {
	// The CLI is its own worker for isolation: process: one binary.
	host.WorkerMain()
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
	for _, line := range errorLines(err) {
		fmt.Fprintf(stderr, "callbox: %s\n", line)
	}
	return code
}

// errorLines is the error as lines for a person: one per error of a
// joined error (a config with several mistakes), each escaped with
// termsafe.Text, since an error can carry guest-controlled text (a
// guest's error message, an export name). A guest cannot start a line of
// its own or send a terminal escape; the raw text stays in the error's
// fields (host.CallbackError.GuestMessage) for programs.
func errorLines(err error) []string {
	var xe *exitError
	if errors.As(err, &xe) && xe == err {
		err = xe.err
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range j.Unwrap() {
			lines = append(lines, errorLines(e)...)
		}
		return lines
	}
	return []string{termsafe.Text(err.Error())}
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
	// An unknown command is a usage error (exit 2), not an internal one.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErr(fmt.Errorf("unknown command %q for %q (run callbox --help)", args[0], cmd.Name()))
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	root.AddCommand(newRunCmd(), newInspectCmd(), newCheckCmd(), newDemoCmd(), newNpyCmd(), newLowerCmd(), newExecCmd(), newVersionCmd(), newNewCmd(), newReplayCmd(), newProfileCmd())
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
