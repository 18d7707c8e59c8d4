package lowering

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tapgroup"
)

// Event is one side effect the evaluator ran, reported to Trace.
type Event struct {
	Op       *Op
	Callback string
	Ordered  bool
	Chain    string // for ordered effects
	Tap      bool
	Inputs   []abi.Tensor
	// Err is the call's error (io_call only; a tap's error surfaces at the
	// barrier that ends the run).
	Err error
}

// EvalOptions configure an Evaluator.
type EvalOptions struct {
	// Trace, when set, is called for every io_call when it has run and for
	// every tap when it is issued, in program order, on the goroutine that
	// called Run.
	Trace func(Event)
}

// Evaluator runs a program on a callbox host: Go kernels for the basic
// ops, Host.Invoke for pure calls and unordered io_calls, one host Chain
// per token chain for ordered io_calls and taps (so a failed ordered call
// stops every later one on its chain), and unordered taps in the
// background, collected by a barrier at the end of the run. Its results
// are those of the compiled program; a failed callback fails the run with
// an *EvalError wrapping the callback's *host.CallbackError (or the
// *host.ChainError of an ordered call that did not run).
//
// An Evaluator may run concurrently from several goroutines; the program
// must not change while it is in use.
type Evaluator struct {
	h    *host.Host
	p    *Program
	n    int
	opts EvalOptions
}

// NewEvaluator checks p against the host's callbacks and prepares it. The
// program may be the output of Lower (tokens are ignored: the host chains
// order the effects) or a checked program before the passes.
func NewEvaluator(h *host.Host, p *Program, opts EvalOptions) (*Evaluator, error) {
	if err := Check(p, HostCatalog(h)); err != nil {
		return nil, err
	}
	return &Evaluator{h: h, p: p, n: p.number(), opts: opts}, nil
}

// EvalError is a failed run: the op that failed and why.
type EvalError struct {
	Pos Pos
	Op  string
	Err error
}

func (e *EvalError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Pos, e.Op, e.Err) }

// Unwrap returns the cause (a *host.CallbackError for a failed callback).
func (e *EvalError) Unwrap() error { return e.Err }

type run struct {
	ev     *Evaluator
	ctx    context.Context
	env    []abi.Tensor
	chains map[string]*host.Chain
	order  []*host.Chain

	taps    tapgroup.Group // unordered taps; their errors are *EvalError
	argsBuf []abi.Tensor
}

// Run evaluates the program on inputs (one per parameter, of the declared
// types) and returns its results.
func (ev *Evaluator) Run(ctx context.Context, inputs ...abi.Tensor) ([]abi.Tensor, error) {
	params := ev.p.Body.Params
	if len(inputs) != len(params) {
		return nil, fmt.Errorf("@%s takes %d inputs, got %d", ev.p.Name, len(params), len(inputs))
	}
	r := &run{ev: ev, ctx: ctx, env: make([]abi.Tensor, ev.n)}
	for i, v := range params {
		in := inputs[i]
		if in.DType != v.Type.DType || !in.Shape.Equal(v.Type.Shape) {
			return nil, fmt.Errorf("input %d (%%%s): expected %s, got %s", i, v.Name, v.Type, in.Type())
		}
		if err := in.Validate(); err != nil {
			return nil, fmt.Errorf("input %d (%%%s): %w", i, v.Name, err)
		}
		r.env[v.id] = in
	}
	err := r.region(ev.p.Body)
	// The barrier: every tap and ordered call has finished before Run
	// returns, whether or not the run failed.
	if berr := r.barrier(); err == nil {
		err = berr
	}
	if err != nil {
		return nil, err
	}
	out := make([]abi.Tensor, len(ev.p.Body.Yield))
	for i, v := range ev.p.Body.Yield {
		out[i] = r.env[v.id]
	}
	return out, nil
}

func (r *run) barrier() error {
	var first error
	for _, ch := range r.order {
		if err := ch.Barrier(r.ctx); err != nil && first == nil {
			first = err
		}
	}
	_ = r.taps.Wait(context.Background()) // every tap, whatever ctx says
	if first != nil {
		return first
	}
	return r.taps.Take()
}

func (r *run) chain(name string) *host.Chain {
	if ch, ok := r.chains[name]; ok {
		return ch
	}
	if r.chains == nil {
		r.chains = map[string]*host.Chain{}
	}
	ch := r.ev.h.NewChain(name)
	r.chains[name] = ch
	r.order = append(r.order, ch)
	return ch
}

// tensorArgs gathers op's operand tensors, tokens left out.
func (r *run) tensorArgs(op *Op) []abi.Tensor {
	args := r.argsBuf[:0]
	for _, a := range op.Args {
		if !a.Type.Token {
			args = append(args, r.env[a.id])
		}
	}
	r.argsBuf = args
	return args
}

func (r *run) fail(op *Op, err error) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		return err
	}
	return &EvalError{Pos: op.Pos, Op: op.describe(), Err: err}
}

func (r *run) region(reg *Region) error {
	for _, op := range reg.Ops {
		if err := r.op(op); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) op(op *Op) error {
	switch op.Kind {
	case OpCreateToken:
		return nil
	case OpCall, OpIOCall:
		args := r.tensorArgs(op)
		var outs []abi.Tensor
		var err error
		if op.Ordered {
			outs, err = r.chain(op.Chain).Invoke(r.ctx, op.Callee, args...)
		} else {
			outs, err = r.ev.h.Invoke(r.ctx, op.Callee, args...)
		}
		if op.Kind == OpIOCall && r.ev.opts.Trace != nil {
			r.ev.opts.Trace(Event{Op: op, Callback: op.Callee, Ordered: op.Ordered, Chain: op.Chain, Inputs: append([]abi.Tensor{}, args...), Err: err})
		}
		if err != nil {
			return r.fail(op, err)
		}
		for i, v := range op.Results {
			if !v.Type.Token {
				r.env[v.id] = outs[i]
			}
		}
		return nil
	case OpTap:
		args := append([]abi.Tensor{}, r.tensorArgs(op)...)
		if r.ev.opts.Trace != nil {
			r.ev.opts.Trace(Event{Op: op, Callback: op.Callee, Ordered: op.Ordered, Chain: op.Chain, Tap: true, Inputs: args})
		}
		if op.Ordered {
			r.chain(op.Chain).Tap(r.ctx, op.Callee, args...)
		} else {
			r.taps.Go(func() error {
				if _, err := r.ev.h.Invoke(r.ctx, op.Callee, args...); err != nil {
					return &EvalError{Pos: op.Pos, Op: op.describe(), Err: err}
				}
				return nil
			})
		}
		for i, v := range op.Results {
			if !v.Type.Token {
				r.env[v.id] = args[i]
			}
		}
		return nil
	case OpCond:
		p := r.env[op.Args[0].id]
		branch := 1
		if op.Args[0].Type.DType == abi.PRED {
			if p.Data[0] != 0 {
				branch = 0
			}
		} else if abi.MustView[int32](p)[0] == 0 {
			branch = 0
		}
		reg := op.Regions[branch]
		if err := r.region(reg); err != nil {
			return err
		}
		for i, v := range op.Results {
			r.env[v.id] = r.env[reg.Yield[i].id]
		}
		return nil
	case OpWhile:
		cond, body := op.Regions[0], op.Regions[1]
		cur := make([]abi.Tensor, len(op.Args))
		for i, a := range op.Args {
			cur[i] = r.env[a.id]
		}
		for {
			if err := r.ctx.Err(); err != nil {
				return r.fail(op, err)
			}
			for i, v := range cond.Params {
				r.env[v.id] = cur[i]
			}
			if err := r.region(cond); err != nil {
				return err
			}
			if r.env[cond.Yield[0].id].Data[0] == 0 {
				break
			}
			for i, v := range body.Params {
				r.env[v.id] = cur[i]
			}
			if err := r.region(body); err != nil {
				return err
			}
			for i, v := range body.Yield {
				cur[i] = r.env[v.id]
			}
		}
		for i, v := range op.Results {
			r.env[v.id] = cur[i]
		}
		return nil
	}
	args := make([]abi.Tensor, len(op.Args))
	for i, a := range op.Args {
		args[i] = r.env[a.id]
	}
	out, err := kernel(op, args)
	if err != nil {
		return r.fail(op, err)
	}
	r.env[op.Results[0].id] = out
	return nil
}
