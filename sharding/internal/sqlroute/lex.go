package sqlroute

import (
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of a token of the statement's own text.
type tokKind int

const (
	tWord   tokKind = iota // unquoted identifier or keyword
	tQuoted                // "ident" or `ident`
	tString                // 'text', x'00'
	tNumber                // 12, 1.5e3
	tBind                  // ?, ?3, $1, :name, @name
	tPunct                 // anything else, one byte each
)

// token is a token's place in the statement's text; whitespace and
// comments lie between tokens.
type token struct {
	kind       tokKind
	start, end int // byte offsets
	depth      int // parentheses open before it; ( and ) carry the outer depth
	match      int // for (, the index of its )
}

// lexed is a statement cut into tokens.
type lexed struct {
	query    string
	toks     []token
	comments [][2]int // byte ranges of comments
}

func (l *lexed) text(i int) string { return l.query[l.toks[i].start:l.toks[i].end] }

// is reports whether token i is the punctuation or keyword s (ASCII, any case).
func (l *lexed) is(i int, s string) bool {
	if i < 0 || i >= len(l.toks) {
		return false
	}
	k := l.toks[i].kind
	return (k == tWord || k == tPunct) && strings.EqualFold(l.text(i), s)
}

// name returns the identifier a word or quoted token spells, and whether
// the token is one.
func (l *lexed) name(i int) (string, bool) {
	t := l.toks[i]
	switch t.kind {
	case tWord:
		return l.text(i), true
	case tQuoted:
		q := l.query[t.start]
		inner := l.query[t.start+1 : t.end-1]
		return strings.ReplaceAll(inner, string([]byte{q, q}), string(q)), true
	}
	return "", false
}

// lex cuts query into tokens. It follows the lexer of the SQL parser for
// what both read, and refuses what the dialects read differently.
func lex(query string) (*lexed, error) {
	l := &lexed{query: query}
	depth := 0
	var open []int // indexes of the ( not closed yet
	for i := 0; i < len(query); {
		c := query[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			// MySQL reads "--" as a comment only before a space or a
			// control character: 5--1 is 6 there and 5 elsewhere.
			if i+2 < len(query) && query[i+2] > ' ' {
				return nil, tableError(ErrUnsupported, "statement", "-- at byte %d is a comment in some dialects only", i)
			}
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				end = len(query) - i
			}
			i += end
			l.comments = append(l.comments, [2]int{start, i})
			continue
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			if strings.HasPrefix(query[i:], "/*!") {
				return nil, tableError(ErrUnsupported, "statement", "MySQL executable comment at byte %d", i)
			}
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				return nil, tableError(ErrSyntax, "statement", "unterminated comment at byte %d", i)
			}
			i += 2 + end + 2
			l.comments = append(l.comments, [2]int{start, i})
			continue
		case c == '\'' || ((c == 'x' || c == 'X') && strings.HasPrefix(query[i+1:], "'")):
			end, err := quoteEnd(query, strings.IndexByte(query[i:], '\'')+i)
			if err != nil {
				return nil, err
			}
			i = end
			l.toks = append(l.toks, token{kind: tString, start: start, end: i, depth: depth})
			continue
		case c == '"': // an identifier, or a string in MySQL
			end, err := quoteEnd(query, i)
			if err != nil {
				return nil, err
			}
			i = end
			l.toks = append(l.toks, token{kind: tQuoted, start: start, end: i, depth: depth})
			continue
		case c == '`':
			end := quotedEnd(query, i)
			if end < 0 {
				return nil, tableError(ErrSyntax, "statement", "unterminated quoted identifier at byte %d", i)
			}
			i = end
			l.toks = append(l.toks, token{kind: tQuoted, start: start, end: i, depth: depth})
			continue
		case isDigit(c) || (c == '.' && i+1 < len(query) && isDigit(query[i+1])):
			i = numberEnd(query, i)
			l.toks = append(l.toks, token{kind: tNumber, start: start, end: i, depth: depth})
			continue
		case isWordStart(query, i):
			i = wordEnd(query, i)
			l.toks = append(l.toks, token{kind: tWord, start: start, end: i, depth: depth})
			continue
		case c == '?':
			i++
			for i < len(query) && isDigit(query[i]) {
				i++
			}
			l.toks = append(l.toks, token{kind: tBind, start: start, end: i, depth: depth})
			continue
		case c == ':' || c == '@' || c == '$':
			i++
			for i < len(query) && isWordByte(query[i]) {
				i++
			}
			l.toks = append(l.toks, token{kind: tBind, start: start, end: i, depth: depth})
			continue
		}
		// One byte of punctuation; parentheses track the depth.
		if c == ')' {
			depth--
			if depth < 0 {
				return nil, tableError(ErrSyntax, "statement", "unbalanced ) at byte %d", i)
			}
			l.toks[open[depth]].match = len(l.toks)
			open = open[:depth]
		}
		_, size := utf8.DecodeRuneInString(query[i:])
		l.toks = append(l.toks, token{kind: tPunct, start: i, end: i + size, depth: depth})
		if c == '(' {
			open = append(open, len(l.toks)-1)
			depth++
		}
		i += size
	}
	if depth != 0 {
		return nil, tableError(ErrSyntax, "statement", "unbalanced (")
	}
	return l, nil
}

// quoteEnd returns the end of the string or identifier whose opening
// quote is at open. A backslash escapes a quote in MySQL's strings but
// not in standard SQL; a literal that ends in different places under the
// two rules is refused rather than guessed.
func quoteEnd(q string, open int) (int, error) {
	std := quotedEnd(q, open)
	if std < 0 {
		return 0, tableError(ErrSyntax, "statement", "unterminated quote at byte %d", open)
	}
	quote := q[open]
	esc := -1
	for j := open + 1; j < len(q); j++ {
		if q[j] == '\\' {
			j++
			continue
		}
		if q[j] == quote {
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			esc = j + 1
			break
		}
	}
	if std != esc {
		return 0, tableError(ErrUnsupported, "statement", "quote at byte %d reads differently with and without backslash escapes", open)
	}
	return std, nil
}

// quotedEnd returns the end of the quoted identifier at i, -1 if it is
// not closed; a doubled quote is part of the name.
func quotedEnd(q string, i int) int {
	quote := q[i]
	for j := i + 1; j < len(q); j++ {
		if q[j] == quote {
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}

func numberEnd(q string, i int) int {
	for i < len(q) && isDigit(q[i]) {
		i++
	}
	if i < len(q) && q[i] == '.' {
		i++
		for i < len(q) && isDigit(q[i]) {
			i++
		}
	}
	if i < len(q) && (q[i] == 'e' || q[i] == 'E') {
		j := i + 1
		if j < len(q) && (q[j] == '+' || q[j] == '-') {
			j++
		}
		if j < len(q) && isDigit(q[j]) {
			for j < len(q) && isDigit(q[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordByte(c byte) bool {
	return c == '_' || isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= utf8.RuneSelf
}

func isWordStart(q string, i int) bool {
	c := q[i]
	if c >= utf8.RuneSelf {
		r, _ := utf8.DecodeRuneInString(q[i:])
		return r != utf8.RuneError
	}
	return isWordByte(c) && !isDigit(c)
}

func wordEnd(q string, i int) int {
	for i < len(q) && isWordByte(q[i]) {
		i++
	}
	return i
}
