// Package clock is the time source contract of the generators: [Clock] and
// the system clock [System]. A fake clock for tests lives in
// engine/clock/clocktest.
//
// It imports only the standard library.
package clock
