package configfile

import (
	"fmt"
	"strings"
)

// suggest returns " (did you mean X?)" for the candidate closest to key,
// or "" when none is close.
func suggest(key string, candidates []string) string {
	if c, ok := closest(key, candidates); ok {
		return fmt.Sprintf(" (did you mean %s?)", c)
	}
	return ""
}

// closest finds the candidate nearest to key, ignoring case, if it is
// near enough to be a likely typo: one edit, two in a longer key, or a
// truncation.
func closest(key string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	k := strings.ToLower(key)
	for _, c := range candidates {
		d := editDistance(k, c)
		if len(k) >= 5 && strings.HasPrefix(c, k) {
			d = min(d, 1) // a truncated key: max_mem for max_memory
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > 2 || bestDist == 2 && len(k) < 6 {
		return "", false
	}
	return best, true
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of adjacent
// bytes (fule for fuel) each count one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
