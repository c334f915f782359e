//go:build race

package tree

// raceEnabled: the race detector is on, and makes building large trees
// slow; the memory figures are taken without it.
const raceEnabled = true
