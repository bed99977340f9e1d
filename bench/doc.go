// Package bench measures idforge's snowflake generator side by side with
// github.com/bwmarrin/snowflake and github.com/sony/sonyflake, and its
// wide-sequence layout against a bare atomic counter. It is a separate
// module so the idforge module itself does not depend on its peers; see
// README.md for how to run it.
package bench
