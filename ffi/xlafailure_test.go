//go:build cgo

package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// The failure table behind callbox_xla_failure (the C entry runs in the C
// harness: TestHarnessXLAHost, TestDoorConformance, TestHarnessHostile).

// A failed XLA call's message ends with its token, and the token, in any
// surrounding text, gives back the failure describe made of the error.
func TestXLAMessageTokenGivesTheFailureBack(t *testing.T) {
	err := &bridgeError{kind: abi.Timeout, callback: "spin", msg: "timeout after 250ms"}
	code, msg := xlaMessage(err)
	assert.Equal(t, abi.CodeDeadlineExceeded, code)
	prefix := `callbox Timeout: ` + err.Error() + ` [callbox error ` + xlaTag + `-`
	require.True(t, strings.HasPrefix(msg, prefix), msg)
	require.True(t, strings.HasSuffix(msg, "]"), msg)
	id, err2 := strconv.ParseUint(msg[len(prefix):len(msg)-1], 10, 64)
	require.NoError(t, err2, msg)

	for _, text := range []string{msg, "DEADLINE_EXCEEDED: " + msg + "\n\nmore", "[callbox error x] " + msg} {
		got, ok := xlaFailureOf(text)
		if assert.True(t, ok, text) {
			assert.Equal(t, describe(err), got, text)
		}
	}
	gotID, ok := xlaFailureID(msg)
	assert.True(t, ok)
	assert.Equal(t, id, gotID)
}

// Text without a whole token of this load of the library names no
// failure; of two tokens the first counts.
func TestXLAFailureIDParsing(t *testing.T) {
	a := recordXLAFailure(errInfo{kind: abi.Unreachable, callback: "a"})
	b := recordXLAFailure(errInfo{kind: abi.GuestError, callback: "b"})
	other := "00000000"
	if xlaTag == other {
		other = "00000001"
	}
	for _, text := range []string{
		"",
		"callbox Unreachable: callback \"a\" failed",
		"[callbox error " + other + "-" + strconv.FormatUint(a, 10) + "]",
		"[callbox error " + xlaTag + "-]",
		"[callbox error " + xlaTag + "-" + strconv.FormatUint(a, 10),
		"[callbox error " + xlaTag + "-" + strconv.FormatUint(a, 10) + "x]",
		"[callbox error " + xlaTag + "-99999999999999999999999]",
		"[callbox error " + xlaTag + "-0]",
	} {
		_, ok := xlaFailureOf(text)
		assert.False(t, ok, "%q", text)
	}
	got, ok := xlaFailureOf("x " + xlaToken(b) + " then " + xlaToken(a))
	require.True(t, ok)
	assert.Equal(t, "b", got.callback)
	got, ok = xlaFailureOf("[callbox error " + xlaTag + "-] " + xlaToken(a))
	require.True(t, ok, "a broken token before a whole one")
	assert.Equal(t, "a", got.callback)
}

// The table keeps the last xlaFailuresMax failures.
func TestXLAFailuresEvictTheOldestByCount(t *testing.T) {
	first := recordXLAFailure(errInfo{kind: abi.Timeout, callback: "first"})
	var last uint64
	for i := 0; i < xlaFailuresMax; i++ {
		last = recordXLAFailure(errInfo{kind: abi.GuestError, callback: "c" + strconv.Itoa(i)})
	}
	_, ok := lookupXLAFailure(first)
	assert.False(t, ok, "the failure %d failures ago is evicted", xlaFailuresMax)
	got, ok := lookupXLAFailure(last)
	require.True(t, ok)
	assert.Equal(t, "c"+strconv.Itoa(xlaFailuresMax-1), got.callback)
	got, ok = lookupXLAFailure(first + 1)
	require.True(t, ok, "the oldest of the last %d is kept", xlaFailuresMax)
	assert.Equal(t, "c0", got.callback)
	_, ok = lookupXLAFailure(last + 1)
	assert.False(t, ok, "an id not given yet")
}

// The table keeps at most xlaFailuresBytes of text beyond the newest
// failure, evicting the oldest first; a failure bigger than the bound is
// kept while it is the newest.
func TestXLAFailuresEvictTheOldestByBytes(t *testing.T) {
	big := strings.Repeat("x", xlaFailuresBytes/4)
	var ids []uint64
	for i := 0; i < 6; i++ {
		ids = append(ids, recordXLAFailure(errInfo{kind: abi.GuestError, guest: big}))
	}
	kept := 0
	for _, id := range ids {
		if _, ok := lookupXLAFailure(id); ok {
			kept++
		}
	}
	assert.Equal(t, 4, kept, "4 MiB holds four 1 MiB failures")
	_, ok := lookupXLAFailure(ids[0])
	assert.False(t, ok, "the oldest goes first")
	_, ok = lookupXLAFailure(ids[5])
	assert.True(t, ok)

	huge := recordXLAFailure(errInfo{kind: abi.GuestError, guest: strings.Repeat("y", xlaFailuresBytes+1)})
	got, ok := lookupXLAFailure(huge)
	require.True(t, ok, "the newest is kept, whatever its size")
	assert.Len(t, got.guest, xlaFailuresBytes+1)
	_, ok = lookupXLAFailure(ids[5])
	assert.False(t, ok, "everything older went to make room")
	small := recordXLAFailure(errInfo{kind: abi.Timeout, callback: "small"})
	_, ok = lookupXLAFailure(huge)
	assert.False(t, ok, "the oversized failure goes once it is not the newest")
	_, ok = lookupXLAFailure(small)
	assert.True(t, ok)
	t.Cleanup(func() {
		// Leave the table small for the tests after this one.
		for i := 0; i < xlaFailuresMax; i++ {
			recordXLAFailure(errInfo{})
		}
	})
}

// Attribute host: the value xlaHostAttr gives resolves to the open host;
// a malformed value, another load's tag, an unknown handle and a closed
// host are refused, naming the attribute and the callback.
func TestXLAHostAttribute(t *testing.T) {
	for _, ref := range []string{"", "3", "@" + xlaTag, "x@" + xlaTag, "0@" + xlaTag, "3@", "-1@" + xlaTag} {
		_, err := xlaHost(ref, "cb")
		var ae *argError
		if assert.ErrorAs(t, err, &ae, "%q", ref) {
			assert.Equal(t, "cb", ae.callback)
			assert.Contains(t, err.Error(), "attribute host: ", ref)
			assert.Contains(t, err.Error(), "is not a host (want HANDLE@TAG", ref)
		}
	}
	_, err := xlaHost("3@"+xlaTag+"x", "cb")
	assert.Equal(t, abi.FailedPrecondition, abi.KindOf(err))
	assert.Contains(t, err.Error(), `callback "cb": attribute host "3@`+xlaTag+`x" names a host of another process`)
	_, err = xlaHost("987654321@"+xlaTag, "cb")
	assert.Equal(t, abi.InvalidArgument, abi.KindOf(err))
	assert.Equal(t, "attribute host: unknown host handle 987654321", err.Error())
	assert.Equal(t, "cb", describe(err).callback)
}
