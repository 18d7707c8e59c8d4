package tensorfile

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// header is a .npy header: the dict NumPy writes with repr().
type header struct {
	descr   string
	fortran bool
	shape   []int64
}

// maxRank bounds the number of dimensions a header may declare (NumPy's
// own limit is 64).
const maxRank = 64

// parseHeader parses the header dict, e.g.
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//
// It accepts the Python literal syntax NumPy and other writers use: keys
// in any order, single- or double-quoted strings, spaces anywhere, an
// optional trailing comma, and padding after the closing brace. Each of the
// three keys must appear exactly once and no other key may.
//
// longs accepts Python 2's "3L" in the shape, as NumPy does for version 1.0
// and 2.0 files (which Python 2 wrote), not for 3.0.
func parseHeader(s string, longs bool) (header, error) {
	p := &litParser{s: s, longs: longs}
	var h header
	seen := map[string]bool{}
	p.space()
	if !p.eat('{') {
		return h, p.errorf("want '{' opening the header dict")
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return h, fmt.Errorf("dict key: %w", err)
		}
		if seen[key] {
			return h, p.errorf("key %q appears twice", key)
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return h, p.errorf("want ':' after key %q", key)
		}
		p.space()
		switch key {
		case "descr":
			if p.peek() == '[' {
				return h, fmt.Errorf("'descr': a structured dtype (a list of fields) is not supported; save each field as its own .npy file")
			}
			if h.descr, err = p.str(); err != nil {
				return h, fmt.Errorf("'descr': %w", err)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
			default:
				return h, p.errorf("'fortran_order': want True or False")
			}
		case "shape":
			if h.shape, err = p.shape(); err != nil {
				return h, fmt.Errorf("'shape': %w", err)
			}
		default:
			return h, p.errorf("unexpected key %q (a .npy header has descr, fortran_order and shape)", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return h, p.errorf("want ',' or '}' after the value of %q", key)
		}
		break
	}
	// Padding: spaces, then the newline.
	rest := strings.TrimRight(p.s[p.i:], " \t\r\n\f")
	if rest != "" {
		return h, p.errorf("unexpected text %q after the header dict", clip(rest))
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("key %q is missing", k)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		return h, errors.New("the header does not end with a newline")
	}
	return h, nil
}

// litParser scans a Python literal.
type litParser struct {
	s     string
	i     int
	longs bool // accept a trailing L on integers
}

func (p *litParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at header byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *litParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *litParser) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *litParser) space() {
	// Python's whitespace between tokens, form feed included (NumPy's
	// ast.literal_eval reads a header with one).
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r' || p.s[p.i] == '\f') {
		p.i++
	}
}

// word consumes an identifier equal to w.
func (p *litParser) word(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	if j := p.i + len(w); j < len(p.s) && (isDigit(p.s[j]) || p.s[j] == '_' || (p.s[j]|0x20 >= 'a' && p.s[j]|0x20 <= 'z')) {
		return false
	}
	p.i += len(w)
	return true
}

// str reads a quoted string without escapes (NumPy's keys and type strings
// have none; a backslash is refused rather than misread).
func (p *litParser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", p.errorf("want a quoted string")
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsAny(v, "\\\n") {
		return "", p.errorf("string %q has an escape or newline", clip(v))
	}
	p.i += end + 2
	return v, nil
}

// shape reads a tuple of non-negative integers: (), (3,), (2, 3). As
// NumPy does, it refuses "(3)" (the integer 3 in Python, not a tuple), and
// Python 2's "3L" unless p.longs.
func (p *litParser) shape() ([]int64, error) {
	if !p.eat('(') {
		return nil, p.errorf("want a tuple")
	}
	dims := []int64{}
	for {
		p.space()
		if p.eat(')') {
			return dims, nil // (), or after a trailing comma
		}
		start := p.i
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
		tok := p.s[start:p.i]
		if p.longs && tok != "" && p.peek() == 'L' {
			p.i++
		}
		if tok == "" {
			return nil, p.errorf("want a non-negative dimension")
		}
		d, err := strconv.ParseUint(tok, 10, 63)
		if err != nil || d > math.MaxInt64 {
			return nil, p.errorf("dimension %s is too large", clip(tok))
		}
		if len(dims) == maxRank {
			return nil, p.errorf("more than %d dimensions", maxRank)
		}
		dims = append(dims, int64(d))
		p.space()
		if p.eat(',') {
			continue
		}
		if !p.eat(')') {
			return nil, p.errorf("want ',' or ')' in the shape")
		}
		if len(dims) == 1 {
			return nil, p.errorf("(%d) is not a tuple; a 1-d shape is written (%d,)", dims[0], dims[0])
		}
		return dims, nil
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
