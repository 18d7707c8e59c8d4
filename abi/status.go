package abi

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Status is what a callback export returns. The non-zero codes are the
// absl/XLA FFI error codes, so a status maps onto an XLA FFI error without a
// table. Any other value is an ABI violation.
type Status int32

// Statuses a guest may return.
const (
	StatusOK                 Status = 0
	StatusUnknown            Status = 2
	StatusInvalidArgument    Status = 3
	StatusResourceExhausted  Status = 8
	StatusFailedPrecondition Status = 9
	StatusUnimplemented      Status = 12
	StatusInternal           Status = 13
)

var statusNames = map[Status]string{
	StatusOK:                 "OK",
	StatusUnknown:            "UNKNOWN",
	StatusInvalidArgument:    "INVALID_ARGUMENT",
	StatusResourceExhausted:  "RESOURCE_EXHAUSTED",
	StatusFailedPrecondition: "FAILED_PRECONDITION",
	StatusUnimplemented:      "UNIMPLEMENTED",
	StatusInternal:           "INTERNAL",
}

// Valid reports whether s is a status ABI v1 defines.
func (s Status) Valid() bool { _, ok := statusNames[s]; return ok }

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Log levels of the callbox.log import.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// Names of the guest's exports and imports, and of the signature section.
const (
	ImportModule      = "callbox"
	ImportError       = "error"
	ImportLog         = "log"
	ExportMemory      = "memory"
	ExportVersion     = "callbox_abi_version"
	ExportAlloc       = "callbox_alloc"
	ExportFree        = "callbox_free"
	ExportSignatures  = "callbox_signatures"
	ExportInitialize  = "_initialize"
	SignatureSection  = "callbox.signatures"
	MaxSignatureTable = 64 << 10 // bytes of signature text the host will read
)

// ParseSignatureTable parses the text of the callbox.signatures custom
// section (or of the callbox_signatures export): one "export = signature"
// per line; blank lines, NUL padding and '#' comments (whole-line or
// trailing; '#' never occurs in a signature) are ignored. The same
// export may appear twice only with the same signature, so sections that a
// linker concatenates stay valid.
func ParseSignatureTable(text []byte) (map[string]*Signature, error) {
	out := map[string]*Signature{}
	for n, line := range bytes.Split(text, []byte{'\n'}) {
		s, _, _ := strings.Cut(string(line), "#")
		s = strings.Trim(s, " \t\r\x00")
		if s == "" {
			continue
		}
		name, sigText, ok := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("signature table line %d: want \"export = signature\", got %q", n+1, s)
		}
		sig, err := ParseSignature(strings.TrimSpace(sigText))
		if err != nil {
			return nil, fmt.Errorf("signature table line %d (%s): %w", n+1, name, err)
		}
		if prev, dup := out[name]; dup && !prev.Equal(sig) {
			return nil, fmt.Errorf("signature table line %d: %s declared twice, as %s and %s", n+1, name, prev, sig)
		}
		out[name] = sig
	}
	return out, nil
}

// formatSignatureTable renders a table in the form ParseSignatureTable reads,
// sorted by export name.
func formatSignatureTable(table map[string]*Signature) []byte {
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s = %s\n", n, table[n])
	}
	return b.Bytes()
}

// Code is an absl / XLA FFI error code (XLA_FFI_Error_Code). Guest statuses
// are a subset of these codes; the host reports every failure kind as one
// (Kind.Code), so the FFI bridge and any other runtime see one mapping.
type Code int32

// The absl status codes.
const (
	CodeOK                 Code = 0
	CodeCancelled          Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int32(c))
}
