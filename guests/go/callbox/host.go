//go:build wasip1

package callbox

import "unsafe"

// The host's imports (ABI.md §1). Both read len bytes of UTF-8 at ptr.

//go:wasmimport callbox error
func hostError(ptr unsafe.Pointer, n uint32)

//go:wasmimport callbox log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

// setError sets the current call's error message; the last one wins.
func setError(msg string) {
	hostError(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// Level is a log level of callbox.log.
type Level int32

// Log levels.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Logger writes lines to the host's log, tagged with the callback. The host
// caps a call's log output (max_log_bytes) and counts what it drops.
type Logger struct{}

// Log is the logger callbacks use: callbox.Log.Info("...").
var Log Logger

// Print emits one line at the given level.
func (Logger) Print(level Level, msg string) {
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// Debug emits one line at debug level.
func (l Logger) Debug(msg string) { l.Print(LevelDebug, msg) }

// Info emits one line at info level.
func (l Logger) Info(msg string) { l.Print(LevelInfo, msg) }

// Warn emits one line at warn level.
func (l Logger) Warn(msg string) { l.Print(LevelWarn, msg) }

// Error emits one line at error level. (It does not fail the call; return
// an error from the callback for that.)
func (l Logger) Error(msg string) { l.Print(LevelError, msg) }
