// Package clock is the time source contract of the generators: [Clock],
// the system clock [System], and [Steady], the time base a running
// generator and the lease that fences it share, which a wall clock stepped
// back never reaches. A fake clock for tests lives in
// engine/clock/clocktest.
//
// It imports only the standard library.
package clock
