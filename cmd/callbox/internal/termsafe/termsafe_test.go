package termsafe

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, 1.5 ≤ x → ok":    "plain text, 1.5 ≤ x → ok",
		"":                            "",
		"\x1b[2J\x1b[31mPWNED\x1b[0m": `\x1b[2J\x1b[31mPWNED\x1b[0m`,
		"a\nfake line\r\bX\t":         `a\nfake line\r\bX\t`,
		"\x00\x07\x7f":                `\x00\x07\x7f`,
		"\u009b31m C1 CSI \u0085":     `\u009b31m C1 CSI \u0085`,
		"abc\u202edcba\u202c":         `abc\u202edcba\u202c`,
		"\u2066\u2067\u2068\u2069\u200e\u200f\u061c": `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`,
		"line\u2028sep\u2029":                        `line\u2028sep\u2029`,
		"zero\u200bwidth\ufeff":                      `zero\u200bwidth\ufeff`,
		"bad \xff\xfe utf8":                          `bad \xff\xfe utf8`,
		"private \U000f0000":                         `private \U000f0000`,
		`back\slash`:                                 `back\slash`,
	} {
		got := Text(in)
		assert.Equal(t, want, got, "%q", in)
		assert.Equal(t, in == want, Safe(in), "%q", in)
		assert.True(t, Safe(got), "the escaped form %q is itself safe", got)
	}
}

// FuzzText: whatever the input, the output holds no byte or rune that
// could change a terminal's state, and safe input comes back unchanged.
func FuzzText(f *testing.F) {
	f.Add("\x1b]0;title\x07")
	f.Add("ok")
	f.Add("\u202e\xc2\x9b")
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || !printable(r) {
				t.Fatalf("Text(%q) = %q keeps %U", s, got, r)
			}
		}
		if Safe(s) && got != s {
			t.Fatalf("safe %q changed into %q", s, got)
		}
	})
}
