package idgen

import (
	"fmt"
	"iter"
	"reflect"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// TagKey is the struct-tag key read by the GORM plugin and the sqlx helper.
const TagKey = "idgen"

// Spec is a parsed idgen tag.
type Spec struct {
	// Kind is the registry kind, e.g. "snowflake" or "chain".
	Kind string
	// Name is the generator name within the kind; "" is the kind's shared default.
	Name string
	// Format names the string format for string fields ("decimal", "radix62",
	// "radix36"); "" means decimal.
	Format string
}

// String returns the spec in tag syntax.
func (s Spec) String() string {
	out := s.Kind
	if s.Name != "" {
		out += ",name=" + s.Name
	}
	if s.Format != "" {
		out += ",format=" + s.Format
	}
	return out
}

// ParseTag parses the value of an idgen tag. Spaces around parts are
// ignored; an empty kind, an option without '=', an empty or repeated option
// and an unknown option are errors wrapping [engine.ErrInvalidConfig]. The
// kind and the format are checked later, against the registry and the field.
func ParseTag(tag string) (Spec, error) {
	s, why := parseTag(tag)
	if why != "" {
		return Spec{}, fmt.Errorf("%w: %s", engine.ErrInvalidConfig, tagProblem(tag, why))
	}
	return s, nil
}

func tagProblem(tag, why string) string {
	return fmt.Sprintf("tag `%s:%q`: %s", TagKey, tag, why)
}

// parseTag returns the spec, or why the tag is wrong.
func parseTag(tag string) (Spec, string) {
	parts := strings.Split(tag, ",")
	var s Spec
	s.Kind = strings.TrimSpace(parts[0])
	if s.Kind == "" {
		return Spec{}, "the generator kind is missing (want e.g. \"snowflake\" or \"chain,name=order\")"
	}
	if strings.ContainsAny(s.Kind, "= ") {
		return Spec{}, fmt.Sprintf("%q is not a generator kind; the tag starts with the kind, options follow after commas", s.Kind)
	}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		key, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case !ok:
			return Spec{}, fmt.Sprintf("option %q is not key=value (known options: name, format)", key)
		case val == "":
			return Spec{}, fmt.Sprintf("option %q has no value", key)
		case seen[key]:
			return Spec{}, fmt.Sprintf("option %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "name":
			s.Name = val
		case "format":
			s.Format = val
		default:
			return Spec{}, fmt.Sprintf("unknown option %q (known options: name, format)", key)
		}
	}
	return s, ""
}

// misspeltKey returns a key of tag that is one typo away from TagKey
// (`idgne:"snowflake"`, `idgn:...`, `IDGEN:...`): such a field would reach
// the database without an ID, so plans reject it. Keys further away are
// other libraries' business.
func misspeltKey(tag reflect.StructTag) (string, bool) {
	for key := range tagKeys(string(tag)) {
		if key != TagKey && oneEditAway(strings.ToLower(key), TagKey) {
			return key, true
		}
	}
	return "", false
}

// tagKeys yields the keys of a conventional struct tag (key:"value" pairs
// separated by spaces), stopping at the first malformed pair as
// reflect.StructTag.Lookup does.
func tagKeys(tag string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for tag != "" {
			tag = strings.TrimLeft(tag, " ")
			i := strings.IndexByte(tag, ':')
			if i <= 0 || i+1 >= len(tag) || tag[i+1] != '"' || strings.ContainsAny(tag[:i], " \"") {
				return
			}
			key, rest := tag[:i], tag[i+1:]
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil || !yield(key) {
				return
			}
			tag = rest[len(quoted):]
		}
	}
}

// oneEditAway reports whether a and b differ by exactly one insertion,
// deletion, substitution or swap of adjacent bytes.
func oneEditAway(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		if a[i+1:] == b[i+1:] {
			return true // substitution
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:] // swap
	case 1:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	default:
		return false
	}
}
