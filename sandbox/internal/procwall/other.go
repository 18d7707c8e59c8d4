//go:build !linux

package procwall

import (
	"context"
	"errors"
	"time"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall/hardening"
)

// Available reports whether this platform can run process isolation: it
// needs Linux (memfd, SOCK_SEQPACKET, seccomp).
const Available = false

var errUnavailable = errors.New("isolation: process needs Linux")

// Options configure an Engine.
type Options struct {
	Engine    string
	Worker    string
	KillGrace time.Duration
	User      User
}

// Engine is unavailable here.
type Engine struct{ sandbox.Engine }

// New fails: there is no process isolation on this platform.
func New(context.Context, Options) (*Engine, error) { return nil, errUnavailable }

// Report is the worker's account of its lockdown.
type Report = hardening.Report

// ServeOptions are the worker's test hooks.
type ServeOptions struct{ Probe func(string) }

// Serve fails: there is no process isolation on this platform.
func Serve(sandbox.Engine, int, any, ServeOptions) error { return errUnavailable }

// Refuse fails: there is no process isolation on this platform.
func Refuse(int, any) error { return errUnavailable }
