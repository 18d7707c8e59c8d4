package host_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// docs/SECURITY.md holds tables generated from test runs between marker
// comments. A run with -security-doc rewrites them; a normal run of the
// hostile suite checks that the committed table still says what the run
// found, so the document cannot go stale.
var securityDoc = flag.Bool("security-doc", false, "rewrite the generated tables of docs/SECURITY.md from this run")

const securityDocPath = "../docs/SECURITY.md"

func regionMarkers(name string) (begin, end string) {
	return "<!-- BEGIN GENERATED: " + name + " -->", "<!-- END GENERATED: " + name + " -->"
}

// readDocRegion returns the text between a region's markers.
func readDocRegion(name string) (string, error) {
	doc, err := os.ReadFile(securityDocPath)
	if err != nil {
		return "", err
	}
	begin, end := regionMarkers(name)
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return "", fmt.Errorf("%s has no %q region", securityDocPath, name)
	}
	return string(doc[i+len(begin) : j]), nil
}

// writeDocRegion replaces the text between a region's markers.
func writeDocRegion(name, content string) error {
	doc, err := os.ReadFile(securityDocPath)
	if err != nil {
		return err
	}
	begin, end := regionMarkers(name)
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q region", securityDocPath, name)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString("\n" + strings.TrimSpace(content) + "\n")
	out.Write(doc[j:])
	return os.WriteFile(securityDocPath, out.Bytes(), 0o644)
}

// tableRows returns the rows of the markdown tables in text, each as its
// trimmed cells, without the header separator rows.
func tableRows(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) > 0 && strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

// machine describes where a generated table was measured.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s, race detector %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), map[bool]string{true: "on", false: "off"}[raceEnabled])
}
