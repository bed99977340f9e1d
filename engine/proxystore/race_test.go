//go:build race

package proxystore_test

// raceEnabled: the pure-Go SQLite runs an order of magnitude slower under
// the race detector.
const raceEnabled = true
