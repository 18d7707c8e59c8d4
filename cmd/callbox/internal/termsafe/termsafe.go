// Package termsafe makes untrusted text safe to print for a person: every
// character that could change a terminal's state or forge the layout of
// the output is replaced by a visible escape. callbox prints guest
// controlled text (error messages, log lines, WASI stdout and stderr,
// export names and signature text) only through Text.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with every unsafe character escaped, on one line:
//
//   - C0 controls and DEL (ESC starts terminal escape sequences; newline,
//     carriage return and backspace rewrite what was printed before) as
//     \n, \r, \t, \b or \xNN;
//   - C1 controls (U+0080-U+009F; U+009B is a one-character CSI on some
//     terminals) as \u0085 style escapes;
//   - bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E,
//     U+200F, U+061C), which reorder the text after them ("Trojan
//     Source"), line and paragraph separators, zero-width and other
//     format characters, and every other rune Go does not consider
//     printable, as \uXXXX or \UXXXXXXXX;
//   - bytes that are not UTF-8, as \xNN.
//
// Printable text, spaces included, is kept as it is, so ordinary messages
// read unchanged. Backslashes are not doubled: the result is for reading,
// not for parsing back; programs should use the raw text the error's
// fields carry.
func Text(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !printable(r):
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Safe reports whether Text would return s unchanged.
func Safe(s string) bool { return safe(s) }

func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return safeSlow(s[i:])
		}
	}
	return true
}

func safeSlow(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if r < 0x20 || r == 0x7f || !printable(r) {
			return false
		}
	}
	return true
}

// printable is unicode.IsPrint, which excludes controls, format characters
// (bidi controls, zero-width characters, U+FEFF), line and paragraph
// separators, private-use and unassigned code points, and spaces other
// than U+0020.
func printable(r rune) bool { return unicode.IsPrint(r) }
