//go:build !cgo

package wasmtime

import (
	"context"
	"errors"

	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// Available reports whether this build includes the wasmtime engine (it
// needs cgo).
const Available = false

// ErrUnavailable is returned by New in builds without cgo.
var ErrUnavailable = errors.New("the wasmtime engine needs cgo; this callbox was built with CGO_ENABLED=0")

// Engine is unavailable without cgo.
type Engine struct{ sandbox.Engine }

// New reports ErrUnavailable.
func New(context.Context, Options) (*Engine, error) { return nil, ErrUnavailable }

// CallerStack is 0: without the engine there is no guest to call.
func CallerStack(uint64) uint64 { return 0 }

// TickerThread is 0: there is no ticker.
func (e *Engine) TickerThread() int { return 0 }
