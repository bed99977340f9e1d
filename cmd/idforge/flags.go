package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/snowlayout"
)

// layouts are the presets -layout names, in the order help lists them.
var layouts = []struct {
	name   string
	layout snowflake.Layout
}{
	{"default", snowflake.Default},
	{"second", snowflake.Seconds},
	{"jssafe", snowflake.JSSafe},
	{"jssafe-second", snowflake.JSSafeSeconds},
}

func layoutNames() []string {
	names := make([]string, len(layouts))
	for i, l := range layouts {
		names[i] = l.name
	}
	return names
}

func layoutByName(name string) snowflake.Layout {
	for _, l := range layouts {
		if l.name == name {
			return l.layout
		}
	}
	return snowflake.Layout{} // unreachable: enumFlag admits only the names above
}

var formatNames = []string{"decimal", "radix62", "radix36", "friendly"}

// formatter returns the named format for IDs of layout l. Radix forms are
// padded so that the strings sort like the IDs.
func formatter(name string, l snowflake.Layout) (snowlayout.Formatter, error) {
	switch name {
	case "friendly":
		return snowlayout.FriendlyFormat(l), nil
	case "decimal":
		return &convert.Formatter{}, nil // the zero value is decimal
	}
	return convert.New(name, convert.Settings{Padded: true})
}

// formatFlag is gen's -format: a format name, or a dated format of a
// chain, checked while the flags are parsed.
type formatFlag struct{ value string }

func formatVar(fs *flag.FlagSet, name, usage string) *formatFlag {
	f := &formatFlag{value: "decimal"}
	fs.Var(f, name, fmt.Sprintf("%s: one of %s, or for a chain a dated format such as INV-{yyyy}{MM}{dd}-{seq:6}",
		usage, strings.Join(formatNames, ", ")))
	return f
}

func (f *formatFlag) String() string { return f.value }

func (f *formatFlag) Set(s string) error {
	if dated.IsFormat(s) {
		if _, err := dated.Parse(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), engine.ErrInvalidConfig.Error()+": "))
		}
	} else if !slices.Contains(formatNames, s) {
		return fmt.Errorf("want one of %s, or a dated format such as INV-{yyyy}{MM}{dd}-{seq:6}", strings.Join(formatNames, ", "))
	}
	f.value = s
	return nil
}

// enumFlag is a string flag restricted to a list, so that a typo fails while
// the flags are parsed, with the list in the message.
type enumFlag struct {
	value   string
	allowed []string
}

func enumVar(fs *flag.FlagSet, name, value string, allowed []string, usage string) *enumFlag {
	f := &enumFlag{value: value, allowed: allowed}
	fs.Var(f, name, fmt.Sprintf("%s (one of %s)", usage, strings.Join(allowed, ", ")))
	return f
}

func (f *enumFlag) String() string { return f.value }

func (f *enumFlag) Set(s string) error {
	if !slices.Contains(f.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(f.allowed, ", "))
	}
	f.value = s
	return nil
}

// parsedFlag is a number, duration or boolean flag whose refusal says what
// it wants ("want a duration such as 10s"), where the flag package's own
// says "parse error", with no hint and, for a variable, no flag name.
type parsedFlag[T any] struct {
	value T
	parse func(string) (T, error)
	want  string
}

// positiveDuration parses a duration above zero: a wait of none or less
// would drop in-flight requests at once.
func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	return d, err
}

// parsedVar defines a parsedFlag; usage must name its argument in
// backquotes, which the flag package cannot guess for its own types.
func parsedVar[T any](fs *flag.FlagSet, name string, value T, parse func(string) (T, error), want, usage string) *T {
	f := &parsedFlag[T]{value: value, parse: parse, want: want}
	fs.Var(f, name, usage)
	return &f.value
}

func (f *parsedFlag[T]) String() string { return fmt.Sprint(f.value) }

func (f *parsedFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return errors.New(f.want)
	}
	f.value = v
	return nil
}

// IsBoolFlag lets a boolean flag stand alone (-proxy for -proxy=true).
func (f *parsedFlag[T]) IsBoolFlag() bool {
	_, ok := any(f.value).(bool)
	return ok
}
