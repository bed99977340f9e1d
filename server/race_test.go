//go:build race

package server

// raceEnabled: the pure-Go SQLite runs an order of magnitude slower under
// the race detector.
const raceEnabled = true
