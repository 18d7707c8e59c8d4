package abi

import (
	"fmt"
	"strconv"
	"strings"
)

// Dim is one dimension of a signature type: a fixed size, or a symbol bound
// by the first argument that uses it.
type Dim struct {
	Size int64  // the fixed size, when Sym is empty
	Sym  string // the symbol, e.g. "n"
}

func (d Dim) String() string {
	if d.Sym != "" {
		return d.Sym
	}
	return strconv.FormatInt(d.Size, 10)
}

// TensorType is a parameter or result type in a signature: an optional name,
// an element type and dimensions such as f32[n,3].
type TensorType struct {
	Name  string
	DType DType
	Dims  []Dim
}

// String formats the type without its name: "f32[n,3]".
func (t TensorType) String() string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteByte('[')
	for i, d := range t.Dims {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.String())
	}
	b.WriteByte(']')
	return b.String()
}

// Result is one result of a signature. When Alias is non-negative the
// result is the input with that index passed through unchanged (as JAX's
// io_callback and Nx's io_callback return their operands): the host hands
// the guest the input's buffer and copies nothing back.
type Result struct {
	TensorType
	Alias int
}

// Signature is a callback's type: its parameters and results, with symbolic
// dimensions, e.g. (x: f32[n,m], y: f32[m]) -> f32[n].
type Signature struct {
	Params  []TensorType
	Results []Result
}

// SyntaxError is a signature that does not parse; Pos is a byte offset.
type SyntaxError struct {
	Text string
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("signature %q: at byte %d: %s", e.Text, e.Pos, e.Msg)
}

// ParseSignature parses the signature grammar of abi/ABI.md:
//
//	signature := params "->" results
//	params    := "(" [ param { "," param } ] ")"
//	param     := [ ident ":" ] type
//	results   := result | "(" [ result { "," result } ] ")"
//	result    := [ ident ":" ] type | "$" ( digits | ident )
//	type      := dtype "[" [ dim { "," dim } ] "]"
//	dim       := digits | ident
func ParseSignature(text string) (*Signature, error) {
	p := &sigParser{text: text}
	sig, err := p.parse()
	if err != nil {
		return nil, err
	}
	for i := range sig.Results {
		r := &sig.Results[i]
		if r.Alias == -2 {
			r.Alias = sig.paramIndex(r.Name)
			if r.Alias < 0 {
				return nil, &SyntaxError{Text: text, Pos: len(text), Msg: fmt.Sprintf("result %d passes through $%s, but no parameter has that name", i, r.Name)}
			}
		}
		if r.Alias >= 0 && r.Alias < len(sig.Params) {
			r.TensorType = sig.Params[r.Alias]
			r.Name = ""
		}
	}
	if err := sig.check(); err != nil {
		return nil, &SyntaxError{Text: text, Pos: len(text), Msg: err.Error()}
	}
	return sig, nil
}

// MustParseSignature is ParseSignature that panics, for constants in tests.
func MustParseSignature(text string) *Signature {
	s, err := ParseSignature(text)
	if err != nil {
		panic(err)
	}
	return s
}

// String formats the signature canonically; ParseSignature(s.String())
// yields an equal signature.
func (s *Signature) String() string {
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range s.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		if p.Name != "" {
			b.WriteString(p.Name + ": ")
		}
		b.WriteString(p.String())
	}
	b.WriteString(") -> ")
	paren := len(s.Results) != 1 || s.Results[0].Name != ""
	if paren {
		b.WriteByte('(')
	}
	for i, r := range s.Results {
		if i > 0 {
			b.WriteString(", ")
		}
		if r.Alias >= 0 {
			// By the parameter's name where it has one, as the SDK
			// READMEs write it ("-> $x"); "$0" otherwise.
			if r.Alias < len(s.Params) && s.Params[r.Alias].Name != "" {
				b.WriteString("$" + s.Params[r.Alias].Name)
			} else {
				b.WriteString("$" + strconv.Itoa(r.Alias))
			}
			continue
		}
		if r.Name != "" {
			b.WriteString(r.Name + ": ")
		}
		b.WriteString(r.String())
	}
	if paren {
		b.WriteByte(')')
	}
	return b.String()
}

// Equal reports whether two signatures are the same type (names included).
func (s *Signature) Equal(o *Signature) bool { return s.String() == o.String() }

func (s *Signature) paramIndex(name string) int {
	for i, p := range s.Params {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func (s *Signature) check() error {
	bound := map[string]bool{}
	names := map[string]bool{}
	for i, p := range s.Params {
		if p.Name != "" {
			if names[p.Name] {
				return fmt.Errorf("parameter name %q used twice", p.Name)
			}
			names[p.Name] = true
		}
		if len(p.Dims) > MaxRank {
			return fmt.Errorf("parameter %d has rank %d, above the maximum %d", i, len(p.Dims), MaxRank)
		}
		for _, d := range p.Dims {
			if d.Sym != "" {
				bound[d.Sym] = true
			}
		}
	}
	for i, r := range s.Results {
		if r.Alias >= len(s.Params) {
			return fmt.Errorf("result %d passes through input %d, but there are %d inputs", i, r.Alias, len(s.Params))
		}
		if len(r.Dims) > MaxRank {
			return fmt.Errorf("result %d has rank %d, above the maximum %d", i, len(r.Dims), MaxRank)
		}
		for _, d := range r.Dims {
			if d.Sym != "" && !bound[d.Sym] {
				return fmt.Errorf("result %d uses dimension %q, which no parameter binds", i, d.Sym)
			}
		}
	}
	return nil
}

// ArgumentError is an input that does not match the signature. It names the
// argument, the expected type (with bound symbols) and the actual type.
// Index is -1 when the number of inputs is wrong.
type ArgumentError struct {
	Index    int
	Name     string
	Expected string
	Actual   string
	Reason   string
}

func (e *ArgumentError) Error() string {
	if e.Index < 0 {
		return e.Reason
	}
	arg := fmt.Sprintf("argument %d", e.Index)
	if e.Name != "" {
		arg += fmt.Sprintf(" (%s)", e.Name)
	}
	if e.Expected == "" {
		return arg + ": " + e.Reason
	}
	msg := fmt.Sprintf("%s: expected %s, got %s", arg, e.Expected, e.Actual)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// OutputSpec is a result resolved for one call: its type and shape, and the
// input it aliases (-1 for none).
type OutputSpec struct {
	DType DType
	Shape Shape
	Alias int
}

// Bind checks concrete input types against the signature and derives the
// result shapes. Inputs are given as (dtype, shape) pairs via TensorMeta.
func (s *Signature) Bind(inputs []TensorMeta) ([]OutputSpec, error) {
	if len(inputs) != len(s.Params) {
		return nil, &ArgumentError{Index: -1, Reason: fmt.Sprintf("got %d inputs, signature %s takes %d", len(inputs), s, len(s.Params))}
	}
	env := map[string]int64{}
	from := map[string]int{}
	for i, p := range s.Params {
		in := inputs[i]
		fail := func(reason string) error {
			return &ArgumentError{Index: i, Name: p.Name, Expected: describe(p, env), Actual: in.DType.String() + in.Shape.String(), Reason: reason}
		}
		if in.DType != p.DType {
			return nil, fail("")
		}
		if len(in.Shape) != len(p.Dims) {
			return nil, fail(fmt.Sprintf("rank %d, want %d", len(in.Shape), len(p.Dims)))
		}
		for j, d := range p.Dims {
			got := in.Shape[j]
			if got < 0 {
				return nil, fail(fmt.Sprintf("dimension %d is negative", j))
			}
			switch {
			case d.Sym == "":
				if got != d.Size {
					return nil, fail(fmt.Sprintf("dimension %d is %d, want %d", j, got, d.Size))
				}
			default:
				if v, ok := env[d.Sym]; ok {
					if v != got {
						return nil, fail(fmt.Sprintf("dimension %d: %s=%d was bound by argument %d", j, d.Sym, v, from[d.Sym]))
					}
				} else {
					env[d.Sym] = got
					from[d.Sym] = i
				}
			}
		}
	}
	outs := make([]OutputSpec, len(s.Results))
	for i, r := range s.Results {
		if r.Alias >= 0 {
			outs[i] = OutputSpec{DType: inputs[r.Alias].DType, Shape: inputs[r.Alias].Shape, Alias: r.Alias}
			continue
		}
		shape := make(Shape, len(r.Dims))
		for j, d := range r.Dims {
			if d.Sym != "" {
				shape[j] = env[d.Sym]
			} else {
				shape[j] = d.Size
			}
		}
		n, err := shape.ByteLen(r.DType)
		if err != nil || n > MaxTensorBytes {
			return nil, fmt.Errorf("result %d: %s%s is too large for the ABI", i, r.DType, shape)
		}
		outs[i] = OutputSpec{DType: r.DType, Shape: shape, Alias: -1}
	}
	return outs, nil
}

// describe formats a parameter type with the symbols bound so far, e.g.
// "f32[n=3,m]".
func describe(t TensorType, env map[string]int64) string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteByte('[')
	for i, d := range t.Dims {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.String())
		if v, ok := env[d.Sym]; ok && d.Sym != "" {
			b.WriteString("=" + strconv.FormatInt(v, 10))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// TensorMeta is a tensor's type without its data.
type TensorMeta struct {
	DType DType
	Shape Shape
}

// Meta returns the tensor's type without its data.
func (t Tensor) Meta() TensorMeta { return TensorMeta{DType: t.DType, Shape: t.Shape} }

type sigParser struct {
	text string
	pos  int
}

func (p *sigParser) errf(format string, args ...any) error {
	return &SyntaxError{Text: p.text, Pos: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *sigParser) skip() {
	for p.pos < len(p.text) && strings.IndexByte(" \t\r\n", p.text[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *sigParser) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.text[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *sigParser) expect(tok string) error {
	if !p.eat(tok) {
		if p.pos >= len(p.text) {
			return p.errf("expected %q, got end of text", tok)
		}
		return p.errf("expected %q, got %q", tok, p.text[p.pos:p.pos+1])
	}
	return nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

func (p *sigParser) ident() string {
	p.skip()
	start := p.pos
	if p.pos < len(p.text) && isIdentStart(p.text[p.pos]) {
		p.pos++
		for p.pos < len(p.text) && (isIdentStart(p.text[p.pos]) || isDigit(p.text[p.pos])) {
			p.pos++
		}
	}
	return p.text[start:p.pos]
}

func (p *sigParser) number() (int64, bool, error) {
	p.skip()
	start := p.pos
	for p.pos < len(p.text) && isDigit(p.text[p.pos]) {
		p.pos++
	}
	if start == p.pos {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(p.text[start:p.pos], 10, 64)
	if err != nil {
		p.pos = start
		return 0, false, p.errf("dimension %q out of range", p.text[start:p.pos])
	}
	return v, true, nil
}

func (p *sigParser) parse() (*Signature, error) {
	sig := &Signature{}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	if !p.eat(")") {
		for {
			t, err := p.tensorType(true)
			if err != nil {
				return nil, err
			}
			sig.Params = append(sig.Params, t)
			if p.eat(")") {
				break
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
		}
	}
	if err := p.expect("->"); err != nil {
		return nil, err
	}
	if p.eat("(") {
		if !p.eat(")") {
			for {
				r, err := p.result()
				if err != nil {
					return nil, err
				}
				sig.Results = append(sig.Results, r)
				if p.eat(")") {
					break
				}
				if err := p.expect(","); err != nil {
					return nil, err
				}
			}
		}
	} else {
		r, err := p.result()
		if err != nil {
			return nil, err
		}
		sig.Results = append(sig.Results, r)
	}
	p.skip()
	if p.pos != len(p.text) {
		return nil, p.errf("unexpected %q after the signature", p.text[p.pos:])
	}
	return sig, nil
}

func (p *sigParser) result() (Result, error) {
	if p.eat("$") {
		start := p.pos
		if n, ok, err := p.number(); err != nil {
			return Result{}, err
		} else if ok {
			if n > MaxRank*1024 {
				p.pos = start
				return Result{}, p.errf("pass-through index %d out of range", n)
			}
			return Result{Alias: int(n)}, nil
		}
		name := p.ident()
		if name == "" {
			return Result{}, p.errf("expected an input index or name after '$'")
		}
		return Result{Alias: -2, TensorType: TensorType{Name: name}}, nil
	}
	t, err := p.tensorType(true)
	return Result{TensorType: t, Alias: -1}, err
}

func (p *sigParser) tensorType(allowName bool) (TensorType, error) {
	var t TensorType
	start := p.pos
	word := p.ident()
	if word == "" {
		return t, p.errf("expected a type such as f32[n]")
	}
	if allowName && p.eat(":") {
		t.Name = word
		word = p.ident()
		if word == "" {
			return t, p.errf("expected a type after %q:", t.Name)
		}
	}
	d, err := ParseDType(word)
	if err != nil {
		p.pos = start
		return t, p.errf("%v", err)
	}
	t.DType = d
	if err := p.expect("["); err != nil {
		return t, err
	}
	if p.eat("]") {
		t.Dims = []Dim{}
		return t, nil
	}
	for {
		if n, ok, err := p.number(); err != nil {
			return t, err
		} else if ok {
			t.Dims = append(t.Dims, Dim{Size: n})
		} else if sym := p.ident(); sym != "" {
			t.Dims = append(t.Dims, Dim{Sym: sym})
		} else {
			return t, p.errf("expected a dimension (a number or a symbol)")
		}
		if p.eat("]") {
			return t, nil
		}
		if !p.eat(",") {
			return t, p.errf("expected \",\" or \"]\" in the dimensions of %s", t.DType)
		}
	}
}

// Typed is anything with a tensor type: a tensor, a device buffer.
type Typed interface{ Meta() TensorMeta }

// Fits reports whether an output buffer of dtype d and shape fits the
// result s describes (the rule CheckOutputs applies to each output).
func (s OutputSpec) Fits(d DType, shape Shape) bool { return d == s.DType && shape.Equal(s.Shape) }

// OutputCountError is the error for a call given got output buffers
// where its signature has len(specs) results.
func OutputCountError(sig *Signature, got, want int) error {
	return fmt.Errorf("got %d output buffers, signature %s has %d results", got, sig, want)
}

// OutputError is a caller's output buffer refused: "output i: reason",
// the one wording of every door's output refusals (ArgumentError's for
// outputs).
type OutputError struct {
	Index  int
	Reason string
}

func (e *OutputError) Error() string { return fmt.Sprintf("output %d: %s", e.Index, e.Reason) }

// OutputMismatchError is the error for output i, of dtype d and shape,
// that does not fit s.
func OutputMismatchError(i int, d DType, shape Shape, s OutputSpec) error {
	return &OutputError{Index: i, Reason: fmt.Sprintf("buffer is %s%s, result is %s%s", d, shape, s.DType, s.Shape)}
}

// OutputSizeError is the error for output i, of type typ (as Tensor.Type
// writes it), whose data is not the want bytes its shape needs.
func OutputSizeError(i int, typ string, want uint64, got int) error {
	return &OutputError{Index: i, Reason: fmt.Sprintf("%s needs %d bytes of data, has %d", typ, want, got)}
}

// CheckOutputs checks caller-provided output buffers against the result
// types a call's signature derives (Bind): the count, then each buffer's
// dtype and shape. The host (whose per-call loop applies Fits and the
// same errors inline) and the GPU path check with these, so an output
// that does not fit is refused with the same words whichever path the
// call takes.
func CheckOutputs[T Typed](sig *Signature, specs []OutputSpec, outs []T) error {
	if len(outs) != len(specs) {
		return OutputCountError(sig, len(outs), len(specs))
	}
	for i, s := range specs {
		if o := outs[i].Meta(); !s.Fits(o.DType, o.Shape) {
			return OutputMismatchError(i, o.DType, o.Shape, s)
		}
	}
	return nil
}
