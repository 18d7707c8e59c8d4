//go:build race

package spectest

const raceEnabled = true
