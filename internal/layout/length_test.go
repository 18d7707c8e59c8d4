package layout

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a hand-written source file may have: one a
// newcomer can hold, each file one job (RATIONALE.md, "Files a newcomer
// can hold").
const maxLines = 850

// sourceExts are the files that count: code in every language the
// repository is written in.
var sourceExts = []string{".go", ".c", ".h", ".py", ".ex", ".exs", ".ts", ".rs", ".sh"}

// TestNoLongFiles: no source file the repository holds (tracked, or new
// and not ignored) is over maxLines, but test data (testdata/: the test
// tables and modules) and the vendored toolchains.
func TestNoLongFiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if !hasSourceExt(rel) || strings.Contains("/"+rel, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			continue // deleted in the work tree
		}
		checked++
		if n := bytes.Count(data, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, over %d: split it by job", rel, n, maxLines)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d source files; is %s the repository?", checked, root)
	}
}

func hasSourceExt(name string) bool {
	for _, e := range sourceExts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}
