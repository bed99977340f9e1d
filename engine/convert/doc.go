// Package convert turns int64 IDs into strings and back: [New] returns the
// formatter of a format name (radix-62, radix-36 or decimal) shaped by
// [Settings]: zero padding, a prefix and a date, as a [Formatter];
// formatting what a generator draws makes string IDs.
//
// It imports engine (for the sentinel errors) and the standard library.
//
//	orders, _ := convert.New("radix62", convert.Settings{Padded: true, Prefix: "ord_"})
//	id, err := gen.NextID(ctx)
//	s := orders.Format(id) // ord_000001LY7VL
//
// # Canonical forms
//
// Parse(Format(x)) == x for every formatter and every int64 x. The radix
// formatters are also canonical: Parse accepts only the one string Format
// writes, so Format(Parse(s)) == s, and one ID cannot hide behind two strings
// in a unique column. Radix-36 is lower case ("ZZ" is rejected), and an
// unpadded radix string with a leading zero is rejected. A prefix keeps
// the digits' strictness; decimal inherits
// strconv's leniency ("+7" and "007" read as 7); a date prefix accepts any
// valid date (see [Settings].Date). Parse errors wrap [engine.ErrInvalidID]
// and quote the input; a value above [math.MaxInt64] is an error, never a
// wrap-around.
//
// # Sorting
//
// The radix-62 alphabet is 0-9A-Za-z and the radix-36 alphabet 0-9a-z, both in
// ASCII order, so padded strings of non-negative IDs sort byte-wise (as SQL
// binary collations and [strings.Compare] do) exactly like the numbers.
// Unpadded strings do not: "z" (61) sorts after "10" (62). Set
// [Settings].Padded (or Width) when the strings are sorted or range-scanned.
//
// # Negative IDs
//
// Generators hand out non-negative IDs, but a Formatter must format any int64,
// so negative IDs are supported the way strconv does it: a leading '-' before
// the digits (padded to the same width). They round-trip, but do not sort:
// ordering holds for non-negative IDs only.
package convert
