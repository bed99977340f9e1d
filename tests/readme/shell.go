package readme

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Placeholders are the store addresses the docs' shell lines write, each
// replaced, word by word, by a test store of its kind before the line runs.
// Every occurrence of one in a block names one and the same fresh store.
var Placeholders = []struct {
	// Doc is the address as the docs write it.
	Doc string
	// Kind is the store the test puts in its place: "postgres" (a fresh
	// database), "mariadb" (a fresh database) or "redis" (a redis-server of
	// the test's own, with AOF as docs/operations.md asks).
	Kind string
}{
	{"postgres://app@db:5432/ids", "postgres"},
	{"app:secret@tcp(db:3306)/ids", "mariadb"},
	{"redis://cache:6379/0", "redis"},
}

// unknownHost matches an address naming the docs' example hosts that is
// not one of the Placeholders: a line that would reach for a host that is
// not there.
var unknownHost = regexp.MustCompile(`[@/(](db|cache)(:\d+)?[/)]`)

// exits matches the comment that marks a line meant to fail: "# exits 1",
// possibly followed by why.
var exits = regexp.MustCompile(`#\s*exits\s+(\d+)\b`)

// ShellLine is one command line of a shell block, split into words as sh
// would split it.
type ShellLine struct {
	// Line is its line in the Markdown file, from 1.
	Line int
	// Text is the line as written.
	Text string
	// Assign holds the NAME=value words before the command: for the
	// command alone, or, with no command, for the lines after it (Export:
	// in their environment too).
	Assign []string
	Export bool
	// Args are the command and its arguments; empty for an assignment.
	Args []string
	// Exit is the status a "# exits N" comment expects; 0 without one.
	Exit int
}

// Idforge reports whether the line runs idforge.
func (l ShellLine) Idforge() bool { return len(l.Args) > 0 && l.Args[0] == "idforge" }

// RawLine is one command line of a shell block, as written.
type RawLine struct {
	// Line is its line in the Markdown file, from 1.
	Line int
	// Text is the line, continuation lines joined.
	Text string
}

// RawLines returns the command lines of a shell block: every non-blank line
// that is not a comment (in a console block, the lines that start with
// "$ ", without it). A line continued with a backslash is joined to the
// next.
func RawLines(b Block) []RawLine {
	var out []RawLine
	raw := strings.Split(strings.TrimSuffix(b.Code, "\n"), "\n")
	for i := 0; i < len(raw); i++ {
		n, text := b.Line+1+i, raw[i]
		for strings.HasSuffix(text, "\\") && i+1 < len(raw) {
			i++
			text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(raw[i])
		}
		if b.Lang == "console" {
			var ok bool
			if text, ok = strings.CutPrefix(text, "$ "); !ok {
				continue // the output of the command above
			}
		}
		if t := strings.TrimSpace(text); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, RawLine{Line: n, Text: text})
	}
	return out
}

// ParseLine splits a command line into words as sh does, with single and
// double quotes, backslashes, $NAME and ${NAME} (expanded with lookup), a
// word that starts with # beginning a comment. Shell syntax beyond that
// (pipes, redirections, ;, &, $(...), backquotes) is an error: the lines
// run one by one, without a shell.
func ParseLine(r RawLine, lookup func(string) (string, bool)) (ShellLine, error) {
	words, comment, err := splitWords(r.Text, lookup)
	if err != nil {
		return ShellLine{}, fmt.Errorf("line %d: %w: %s", r.Line, err, r.Text)
	}
	l := ShellLine{Line: r.Line, Text: r.Text}
	if m := exits.FindStringSubmatch(comment); m != nil {
		l.Exit, _ = strconv.Atoi(m[1])
	}
	if len(words) > 0 && words[0] == "export" {
		l.Export, words = true, words[1:]
	}
	for len(words) > 0 && isAssignment(words[0]) {
		l.Assign, words = append(l.Assign, words[0]), words[1:]
	}
	if l.Export && len(words) > 0 {
		return ShellLine{}, fmt.Errorf("line %d: export takes NAME=value words only: %s", r.Line, r.Text)
	}
	l.Args = words
	return l, nil
}

var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	return ok && name.MatchString(k)
}

// splitWords splits line into words as sh does, expanding variables with
// lookup, and returns the comment that ends it ("" for none).
func splitWords(line string, lookup func(string) (string, bool)) (words []string, comment string, err error) {
	var (
		cur    strings.Builder
		inWord bool
		quote  rune // 0, '\'' or '"'
	)
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			if i+1 >= len(rs) {
				return nil, "", errors.New("a backslash ends the line")
			}
			next := rs[i+1]
			if quote == '"' && !strings.ContainsRune(`"\$`+"`", next) {
				cur.WriteRune(r) // inside double quotes other backslashes stay
			}
			cur.WriteRune(next)
			i, inWord = i+1, true
		case r == '$':
			v, n, err := expand(rs[i+1:], lookup)
			if err != nil {
				return nil, "", err
			}
			i += n
			if quote == '"' {
				cur.WriteString(v)
				inWord = true
				continue
			}
			// Unquoted, the value is split into words at blanks.
			end := func() {
				if inWord {
					words, inWord = append(words, cur.String()), false
					cur.Reset()
				}
			}
			fields := strings.Fields(v)
			if len(fields) > 0 && strings.TrimLeft(v, " \t\n") != v {
				end()
			}
			for j, f := range fields {
				if j > 0 {
					end()
				}
				cur.WriteString(f)
				inWord = true
			}
			if len(fields) > 0 && strings.TrimRight(v, " \t\n") != v {
				end()
			}
		case quote == '"':
			if r == '"' {
				quote = 0
			} else if r == '`' {
				return nil, "", errors.New("command substitution is not run")
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case r == '#' && !inWord:
			return words, string(rs[i:]), nil
		case strings.ContainsRune("|&;<>()`", r):
			return nil, "", fmt.Errorf("shell syntax %q is not run (one command a line, no pipes, lists or redirections)", r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, "", fmt.Errorf("unclosed %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, "", nil
}

// expand reads the variable reference after a '$' in rs and returns its
// value and how many runes it took.
func expand(rs []rune, lookup func(string) (string, bool)) (string, int, error) {
	var key string
	var n int
	switch {
	case len(rs) > 0 && rs[0] == '{':
		end := strings.IndexRune(string(rs), '}')
		if end < 0 {
			return "", 0, errors.New("unclosed ${")
		}
		key = string(rs[1:end])
		n = len([]rune(string(rs[:end+1])))
	case len(rs) > 0 && rs[0] == '(':
		return "", 0, errors.New("command substitution is not run")
	default:
		for n < len(rs) && (rs[n] == '_' || rs[n] >= 'a' && rs[n] <= 'z' || rs[n] >= 'A' && rs[n] <= 'Z' || n > 0 && rs[n] >= '0' && rs[n] <= '9') {
			n++
		}
		key = string(rs[:n])
	}
	if !name.MatchString(key) {
		return "", 0, fmt.Errorf("$%s: not a variable the test expands", string(rs[:max(n, 1)]))
	}
	v, ok := lookup(key)
	if !ok {
		return "", 0, fmt.Errorf("$%s is not set: set it on a line of the block before", key)
	}
	return v, n, nil
}
