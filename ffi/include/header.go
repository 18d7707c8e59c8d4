// Package include holds callbox.h, the C API's header: the contract, and
// the one owner of the C API's version, which Go code (the CLI's version
// command, release checks) reads from it.
package include

import (
	_ "embed"
	"fmt"
	"regexp"
)

//go:embed callbox.h
var header string

// Header returns callbox.h's text.
func Header() string { return header }

// Version returns the C API's version, "MAJOR.MINOR.PATCH", as callbox.h
// defines it.
func Version() string {
	line := regexp.MustCompile(`(?m)^#define CALLBOX_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+)$`)
	parts := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(header, -1) {
		parts[m[1]] = m[2]
	}
	return fmt.Sprintf("%s.%s.%s", parts["MAJOR"], parts["MINOR"], parts["PATCH"])
}
