package lowering

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Effects is what an op (with its regions) does besides computing.
type Effects struct {
	// Any is true when the op has a side effect (io_call, tap, or a region
	// op containing one).
	Any bool
	// Chains are the token chains of its ordered effects, sorted.
	Chains []string
}

// EffectsOf analyzes one op, regions included.
func EffectsOf(op *Op) Effects {
	set := map[string]bool{}
	any := false
	visit := func(o *Op) {
		if o.Kind == OpIOCall || o.Kind == OpTap {
			any = true
			if o.Ordered {
				set[o.Chain] = true
			}
		}
	}
	visit(op)
	for _, r := range op.Regions {
		walkRegion(r, visit)
	}
	e := Effects{Any: any}
	for c := range set {
		e.Chains = append(e.Chains, c)
	}
	sort.Strings(e.Chains)
	return e
}

// effectTable gives the effects analyze computed for every op of a
// program, bottom-up, so the analysis is linear in the program size. They
// are kept on the ops themselves (no map lookups on the hot path) and are
// valid until the program changes.
type effectTable struct{}

func (effectTable) of(op *Op) Effects { return op.eff }

func analyze(p *Program) effectTable {
	var t effectTable
	single := map[string][]string{} // one shared []string{chain} per chain
	var region func(r *Region) Effects
	region = func(r *Region) Effects {
		var out Effects
		for _, op := range r.Ops {
			e := Effects{}
			switch {
			case op.Kind == OpIOCall || op.Kind == OpTap:
				e.Any = true
				if op.Ordered {
					s, ok := single[op.Chain]
					if !ok {
						s = []string{op.Chain}
						single[op.Chain] = s
					}
					e.Chains = s
				}
			case len(op.Regions) > 0:
				for _, rr := range op.Regions {
					re := region(rr)
					e.Any = e.Any || re.Any
					e.Chains = unionChains(e.Chains, re.Chains)
				}
			}
			op.eff = e
			out.Any = out.Any || e.Any
			out.Chains = unionChains(out.Chains, e.Chains)
		}
		return out
	}
	region(p.Body)
	return t
}

// unionChains merges two sorted chain lists. It returns a when b adds
// nothing, so the common cases (no chains, one chain) allocate nothing;
// the result is never modified in place.
func unionChains(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	i, j := 0, 0
	var out []string
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	if len(out) == len(a) {
		return a
	}
	return out
}

// Options select the passes Lower runs.
type Options struct {
	NoCSE bool
	NoDCE bool
}

// Lower runs the passes on a checked program, in place: CSE of identical
// pure ops (pure callback calls included), DCE, then token threading. A
// program that already carries tokens (the output of a previous Lower) is
// not threaded again; its tokens are verified instead.
func Lower(p *Program, opts Options) error {
	if !opts.NoCSE {
		CSE(p)
	}
	if !opts.NoDCE {
		DCE(p)
	}
	if hasTokens(p) {
		return VerifyTokens(p)
	}
	ThreadTokens(p)
	return VerifyTokens(p)
}

func hasTokens(p *Program) bool {
	found := false
	p.Walk(func(op *Op) {
		for _, v := range op.Results {
			if v.Type.Token {
				found = true
			}
		}
	})
	return found
}

// CSE replaces every pure op (no regions, no effects) that repeats an
// identical op visible at its position — same kind, attributes, callee and
// operands — by the earlier op's results. Identical pure callback calls are
// thus made once.
func CSE(p *Program) {
	p.number()
	c := &cse{table: map[string][]*Value{}, repl: map[*Value]*Value{}}
	c.region(p.Body)
}

type cse struct {
	table map[string][]*Value
	repl  map[*Value]*Value
	key   []byte
}

func (c *cse) get(v *Value) *Value {
	if r, ok := c.repl[v]; ok {
		return r
	}
	return v
}

func (c *cse) region(r *Region) {
	var added []string
	kept := r.Ops[:0]
	for _, op := range r.Ops {
		for i, a := range op.Args {
			op.Args[i] = c.get(a)
		}
		if len(op.Regions) > 0 {
			for _, sub := range op.Regions {
				c.region(sub)
			}
			kept = append(kept, op)
			continue
		}
		if op.Kind == OpIOCall || op.Kind == OpTap || op.Kind == OpCreateToken {
			kept = append(kept, op)
			continue
		}
		k := c.keyOf(op)
		if prev, ok := c.table[k]; ok {
			for i, v := range op.Results {
				c.repl[v] = prev[i]
			}
			continue
		}
		c.table[k] = op.Results
		added = append(added, k)
		kept = append(kept, op)
	}
	for i := len(kept); i < len(r.Ops); i++ {
		r.Ops[i] = nil
	}
	r.Ops = kept
	for i, v := range r.Yield {
		r.Yield[i] = c.get(v)
	}
	for _, k := range added {
		delete(c.table, k)
	}
}

func (c *cse) keyOf(op *Op) string {
	b := c.key[:0]
	b = append(b, byte(op.Kind))
	b = append(b, op.Callee...)
	b = append(b, 0)
	b = append(b, op.Dir...)
	b = append(b, 0)
	b = append(b, op.Out.String()...)
	b = append(b, 0)
	for _, a := range op.Axes {
		b = binary.LittleEndian.AppendUint64(b, uint64(a))
	}
	b = append(b, 0)
	for _, a := range op.Args {
		b = binary.LittleEndian.AppendUint32(b, uint32(a.id))
	}
	if op.Kind == OpConstant {
		b = append(b, 0)
		b = append(b, op.Value.Data...)
	}
	c.key = b
	return string(b)
}

// DCE removes ops whose results are unused and that have no effect, and
// unused results of conditionals. Every effect is kept, with everything it
// depends on. A loop without effects whose results are unused is removed
// (loops are assumed to terminate, as in XLA).
func DCE(p *Program) {
	n := p.number()
	d := &dce{live: make([]bool, n), eff: analyze(p)}
	for _, v := range p.Body.Yield {
		d.live[v.id] = true
	}
	d.region(p.Body)
}

type dce struct {
	live []bool
	eff  effectTable
}

func (d *dce) region(r *Region) {
	for i := len(r.Ops) - 1; i >= 0; i-- {
		op := r.Ops[i]
		needed := d.eff.of(op).Any
		for _, v := range op.Results {
			needed = needed || d.live[v.id]
		}
		if !needed {
			r.Ops[i] = nil
			continue
		}
		switch op.Kind {
		case OpCond:
			d.pruneCond(op)
			for _, sub := range op.Regions {
				for _, v := range sub.Yield {
					d.live[v.id] = true
				}
				d.region(sub)
			}
		case OpWhile:
			for _, sub := range op.Regions {
				for _, v := range sub.Yield {
					d.live[v.id] = true
				}
				d.region(sub)
			}
		}
		for _, a := range op.Args {
			d.live[a.id] = true
		}
	}
	kept := r.Ops[:0]
	for _, op := range r.Ops {
		if op != nil {
			kept = append(kept, op)
		}
	}
	for i := len(kept); i < len(r.Ops); i++ {
		r.Ops[i] = nil
	}
	r.Ops = kept
}

// pruneCond drops a conditional's unused results from both branches.
func (d *dce) pruneCond(op *Op) {
	keep := op.Results[:0]
	var idx []int
	for i, v := range op.Results {
		if d.live[v.id] || v.Type.Token {
			idx = append(idx, i)
			v.Index = len(keep)
			keep = append(keep, v)
		}
	}
	if len(idx) == len(op.Results) {
		return
	}
	for _, r := range op.Regions {
		y := make([]*Value, len(idx))
		for j, i := range idx {
			y[j] = r.Yield[i]
		}
		r.Yield = y
	}
	op.Results = keep
}

// ThreadTokens gives every ordered effect a token chain in program order:
// one create_token per chain at the start of the program; each ordered
// io_call or tap takes its chain's current token as its last operand and
// returns the next one as its last result; a cond whose branches have
// ordered effects returns the chains' tokens from both branches (each
// branch starts from the token current before the cond); a while loop
// carries them as extra loop-carried values. This is the rewrite JAX's
// _rewrite_jaxpr does for ordered effects.
func ThreadTokens(p *Program) {
	eff := analyze(p)
	// Fresh names: tok<N> above every tok<N> the program already has.
	t := &threader{eff: eff}
	note := func(v *Value) {
		if rest, ok := strings.CutPrefix(v.Name, "tok"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= t.next {
				t.next = n + 1
			}
		}
	}
	for _, v := range p.Body.Params {
		note(v)
	}
	p.Walk(func(op *Op) {
		for _, v := range op.Results {
			note(v)
		}
		for _, r := range op.Regions {
			for _, v := range r.Params {
				note(v)
			}
		}
	})
	chains := map[string]bool{}
	for _, op := range p.Body.Ops {
		for _, c := range eff.of(op).Chains {
			chains[c] = true
		}
	}
	var names []string
	for c := range chains {
		names = append(names, c)
	}
	sort.Strings(names)
	cur := map[string]*Value{}
	var head []*Op
	for _, c := range names {
		op := &Op{Kind: OpCreateToken, Pos: p.Pos}
		v := &Value{Name: t.fresh(), Type: TokenType, Def: op}
		op.Results = []*Value{v}
		head = append(head, op)
		cur[c] = v
	}
	p.Body.Ops = append(head, p.Body.Ops...)
	t.region(p.Body, cur)
}

type threader struct {
	eff  effectTable
	next int
}

func (t *threader) fresh() string {
	n := "tok" + strconv.Itoa(t.next)
	t.next++
	return n
}

func (t *threader) newToken(def *Op) *Value {
	v := &Value{Name: t.fresh(), Type: TokenType, Def: def, Index: len(def.Results)}
	def.Results = append(def.Results, v)
	return v
}

func (t *threader) region(r *Region, cur map[string]*Value) {
	for _, op := range r.Ops {
		chains := t.eff.of(op).Chains
		if len(chains) == 0 {
			continue
		}
		switch op.Kind {
		case OpIOCall, OpTap:
			c := op.Chain
			op.Args = append(op.Args, cur[c])
			cur[c] = t.newToken(op)
		case OpCond:
			for _, br := range op.Regions {
				inner := map[string]*Value{}
				for _, c := range chains {
					inner[c] = cur[c]
				}
				t.region(br, inner)
				for _, c := range chains {
					br.Yield = append(br.Yield, inner[c])
				}
			}
			for _, c := range chains {
				cur[c] = t.newToken(op)
			}
		case OpWhile:
			for _, c := range chains {
				op.Args = append(op.Args, cur[c])
			}
			for ri, br := range op.Regions {
				inner := map[string]*Value{}
				for _, c := range chains {
					v := &Value{Name: t.fresh(), Type: TokenType, Index: len(br.Params)}
					br.Params = append(br.Params, v)
					inner[c] = v
				}
				t.region(br, inner)
				if ri == 1 {
					for _, c := range chains {
						br.Yield = append(br.Yield, inner[c])
					}
				}
			}
			for _, c := range chains {
				cur[c] = t.newToken(op)
			}
		}
	}
}

// VerifyTokens checks that a threaded program orders its effects: every
// ordered effect takes its chain's current token (the one the previous
// ordered effect on that chain, in program order, returned) and returns
// the next; conditionals and loops pass the chains through as ThreadTokens
// lays them out; and tokens flow nowhere else.
func VerifyTokens(p *Program) error {
	eff := analyze(p)
	v := &verifier{eff: eff}
	cur := map[string]*Value{}
	var fresh []*Value
	var chains []string
	set := map[string]bool{}
	for _, op := range p.Body.Ops {
		if op.Kind == OpCreateToken {
			fresh = append(fresh, op.Results[0])
		}
		for _, c := range eff.of(op).Chains {
			set[c] = true
		}
	}
	for c := range set {
		chains = append(chains, c)
	}
	sort.Strings(chains)
	if len(fresh) != len(chains) {
		return &Error{Pos: p.Pos, Msg: fmt.Sprintf("the program has %d create_token ops for %d chains %v", len(fresh), len(chains), chains)}
	}
	for i, c := range chains {
		cur[c] = fresh[i]
	}
	return v.region(p.Body, cur)
}

// verifier walks the program in order keeping each chain's current token.
// Taking the current token and replacing it with the op's result makes a
// second use of a token on the same path impossible; the branches of a
// cond each start from the token before it.
type verifier struct {
	eff effectTable
}

func (v *verifier) take(op *Op, tok *Value, chain string, cur map[string]*Value) error {
	if tok == nil || !tok.Type.Token || tok != cur[chain] {
		got := "no token"
		if tok != nil {
			got = "%" + tok.Name
		}
		return opError(op, "ordered effect on chain %q must take the chain's current token %%%s, takes %s", chain, nameOf(cur[chain]), got)
	}
	return nil
}

func nameOf(v *Value) string {
	if v == nil {
		return "(none)"
	}
	return v.Name
}

func lastTokens(vs []*Value, n int) ([]*Value, bool) {
	if len(vs) < n {
		return nil, false
	}
	out := vs[len(vs)-n:]
	for _, t := range out {
		if !t.Type.Token {
			return nil, false
		}
	}
	return out, true
}

func (v *verifier) region(r *Region, cur map[string]*Value) error {
	for _, op := range r.Ops {
		chains := v.eff.of(op).Chains
		switch {
		case op.Kind == OpIOCall || op.Kind == OpTap:
			if !op.Ordered {
				break
			}
			n := len(op.Args)
			if n == 0 || len(op.Results) == 0 {
				return opError(op, "ordered effect is not on a token chain")
			}
			if err := v.take(op, op.Args[n-1], op.Chain, cur); err != nil {
				return err
			}
			out := op.Results[len(op.Results)-1]
			if !out.Type.Token {
				return opError(op, "ordered effect returns no token")
			}
			cur[op.Chain] = out
			continue
		case op.Kind == OpCond && len(chains) > 0:
			res, ok := lastTokens(op.Results, len(chains))
			if !ok {
				return opError(op, "does not return the tokens of chains %v", chains)
			}
			for _, br := range op.Regions {
				inner := map[string]*Value{}
				for _, c := range chains {
					inner[c] = cur[c]
				}
				if err := v.region(br, inner); err != nil {
					return err
				}
				y, ok := lastTokens(br.Yield, len(chains))
				if !ok {
					return opError(op, "a branch does not yield the tokens of chains %v", chains)
				}
				for i, c := range chains {
					if y[i] != inner[c] {
						return opError(op, "a branch yields %%%s for chain %q, not its last token %%%s", y[i].Name, c, nameOf(inner[c]))
					}
				}
			}
			for i, c := range chains {
				cur[c] = res[i]
			}
			continue
		case op.Kind == OpWhile && len(chains) > 0:
			args, ok := lastTokens(op.Args, len(chains))
			if !ok {
				return opError(op, "does not carry the tokens of chains %v", chains)
			}
			for i, c := range chains {
				if err := v.take(op, args[i], c, cur); err != nil {
					return err
				}
			}
			body := op.Regions[1]
			params, ok := lastTokens(body.Params, len(chains))
			if !ok {
				return opError(op, "the body takes no tokens for chains %v", chains)
			}
			inner := map[string]*Value{}
			for i, c := range chains {
				inner[c] = params[i]
			}
			if err := v.region(op.Regions[0], map[string]*Value{}); err != nil {
				return err
			}
			if err := v.region(body, inner); err != nil {
				return err
			}
			y, _ := lastTokens(body.Yield, len(chains))
			for i, c := range chains {
				if y == nil || y[i] != inner[c] {
					return opError(op, "the body does not yield its last token of chain %q", c)
				}
			}
			res, _ := lastTokens(op.Results, len(chains))
			for i, c := range chains {
				cur[c] = res[i]
			}
			continue
		}
		if op.Kind == OpWhile || op.Kind == OpCond {
			for _, br := range op.Regions {
				if err := v.region(br, map[string]*Value{}); err != nil {
					return err
				}
			}
		}
		if op.Kind == OpWhile {
			continue // carried tokens of a loop without ordered effects are inert
		}
		for i, a := range op.Args {
			if a.Type.Token {
				return opError(op, "operand %d (%%%s) is a token, but %s has no ordered effect", i, a.Name, op.Kind)
			}
		}
	}
	return nil
}
