package lowering

// The lexer of the program text: tokens (names with their sigils, numbers,
// strings, punctuation) with their positions, comments and blanks skipped.
// The parser (parse.go) reads them one at a time, a few ahead at most.

import (
	"fmt"
	"strconv"
	"strings"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // keyword, dtype, direction
	tValue          // %name
	tSymbol         // @name
	tNumber         // 12, -1.5e3
	tString         // "text"
	tPunct          // ( ) [ ] { } , : = ->
)

type token struct {
	kind tokKind
	text string // without the sigil or quotes
	pos  Pos
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tValue:
		return "%" + t.text
	case tSymbol:
		return "@" + t.text
	case tString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

type lexer struct {
	src  string
	file string
	off  int
	line int
	col  int
}

func isNameByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (l *lexer) errAt(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) advance(n int) {
	for i := 0; i < n; i++ {
		if l.src[l.off] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.off++
	}
}

func (l *lexer) next() (token, *Error) {
	for l.off < len(l.src) {
		c := l.src[l.off]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			l.advance(1)
			continue
		}
		if c == '#' {
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance(1)
			}
			continue
		}
		break
	}
	pos := Pos{File: l.file, Line: l.line, Col: l.col}
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: pos}, nil
	}
	c := l.src[l.off]
	switch {
	case c == '%' || c == '@':
		start := l.off + 1
		end := start
		for end < len(l.src) && isNameByte(l.src[end]) {
			end++
		}
		if end == start {
			return token{}, l.errAt(pos, "expected a name after %q", string(c))
		}
		l.advance(end - l.off)
		k := tValue
		if c == '@' {
			k = tSymbol
		}
		return token{kind: k, text: l.src[start:end], pos: pos}, nil
	case c == '"':
		end := l.off + 1
		for end < len(l.src) && l.src[end] != '"' && l.src[end] != '\n' {
			if l.src[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(l.src) || l.src[end] != '"' {
			return token{}, l.errAt(pos, "unterminated string")
		}
		s, err := strconv.Unquote(l.src[l.off : end+1])
		if err != nil {
			return token{}, l.errAt(pos, "bad string %s: %v", l.src[l.off:end+1], err)
		}
		l.advance(end + 1 - l.off)
		return token{kind: tString, text: s, pos: pos}, nil
	case c == '-' && l.off+1 < len(l.src) && l.src[l.off+1] == '>':
		l.advance(2)
		return token{kind: tPunct, text: "->", pos: pos}, nil
	case strings.IndexByte("()[]{},:=", c) >= 0:
		l.advance(1)
		return token{kind: tPunct, text: string(c), pos: pos}, nil
	case c == '-' || c == '+' || c >= '0' && c <= '9':
		end := l.off + 1
		for end < len(l.src) {
			d := l.src[end]
			if d >= '0' && d <= '9' || d == '.' || d == 'e' || d == 'E' || d == 'x' || d >= 'a' && d <= 'f' || d >= 'A' && d <= 'F' ||
				(d == '-' || d == '+') && (l.src[end-1] == 'e' || l.src[end-1] == 'E') {
				end++
				continue
			}
			if (d == 'i' || d == 'n') && end == l.off+1 { // -inf, -nan
				for end < len(l.src) && isNameByte(l.src[end]) {
					end++
				}
			}
			break
		}
		text := l.src[l.off:end]
		l.advance(end - l.off)
		return token{kind: tNumber, text: text, pos: pos}, nil
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		end := l.off
		for end < len(l.src) && (isNameByte(l.src[end]) && l.src[end] != '.' && l.src[end] != '-') {
			end++
		}
		text := l.src[l.off:end]
		l.advance(end - l.off)
		return token{kind: tIdent, text: text, pos: pos}, nil
	}
	return token{}, l.errAt(pos, "unexpected character %q", string(rune(c)))
}
