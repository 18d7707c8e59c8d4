//go:build !race

package host_test

const raceEnabled = false
