// Package radix writes integers in the bases of idforge's string forms. It
// is shared by engine (the methods of engine.ID) and engine/convert (the
// formatters), which cannot import each other both ways, and imports only
// the standard library.
package radix

// Alphabets. Base 62 and base 36 are in ASCII order, so padded strings sort
// like the numbers; base 58 is bwmarrin/snowflake's (Flickr's), lower case
// first, kept for the strings that library wrote.
const (
	Alphabet62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	Alphabet36 = "0123456789abcdefghijklmnopqrstuvwxyz"
	Alphabet58 = "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ"
)

// Buffer holds the digits of any uint64 in any of the bases above: base 36
// needs the most, 13.
type Buffer [13]byte

// Digits writes u in base into the end of tmp and returns where the digits
// start. It is small enough to inline, which makes a constant base compile
// to multiplications: more than twice as fast as dividing by a variable.
func Digits(tmp *Buffer, u, base uint64, alphabet string) int {
	i := len(tmp)
	for u >= base {
		q := u / base
		i--
		tmp[i] = alphabet[u-q*base]
		u = q
	}
	i--
	tmp[i] = alphabet[u]
	return i
}
