package abi

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// CallbackIDPrefix starts every callback id; the digit is the id scheme's
// version.
const CallbackIDPrefix = "cb1-"

// CallbackID is the content address of a callback: the sha256 of the module
// bytes' sha256, the export name (length-prefixed) and the canonical
// signature text, as "cb1-" and 64 hex digits. Two processes that load the
// same module, export and signature agree on it, so a compiled tensor
// program (an XLA executable, a lowered program) can name a callback
// without a process-local pointer, and a module that changed gets a
// different id.
func CallbackID(moduleSum [32]byte, export string, sig *Signature) string {
	h := sha256.New()
	h.Write(moduleSum[:])
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(export)))
	h.Write(n[:])
	h.Write([]byte(export))
	h.Write([]byte(sig.String()))
	return CallbackIDPrefix + hex.EncodeToString(h.Sum(nil))
}

// IsCallbackID reports whether s has the form of a callback id (it may
// still name no loaded callback).
func IsCallbackID(s string) bool {
	if !strings.HasPrefix(s, CallbackIDPrefix) || len(s) != len(CallbackIDPrefix)+64 {
		return false
	}
	_, err := hex.DecodeString(s[len(CallbackIDPrefix):])
	return err == nil && strings.ToLower(s) == s
}
