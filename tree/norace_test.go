//go:build !race

package tree

// raceEnabled: the race detector is off.
const raceEnabled = false
