//go:build !race

package proxystore_test

const raceEnabled = false
