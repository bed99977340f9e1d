package sharding

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// Bounds on a rule's text. A rule is configuration a person writes, a few
// dozen bytes ("(id+1)%4/2+1"); past these it is a mistake or hostile input,
// refused before it is parsed, so that parsing, evaluating and printing it
// (which recurse on its tree) stay small.
const (
	maxRuleLen   = 1024 // bytes of rule text
	maxRuleDepth = 32   // nested parentheses
)

// rule is a parsed integer expression over the ID, such as "(id+1)%4/2+1":
// ShardingSphere's inline expressions, checked instead of wrapping around.
type rule struct {
	op          byte // 0 for a leaf
	n           int64
	isID        bool
	left, right *rule
}

// parseRule parses src: "id", integer literals, + - * / % and parentheses,
// with the usual precedence, left to right. Text longer than maxRuleLen,
// parentheses nested deeper than maxRuleDepth and any byte but those and
// spaces are refused; errors quote at most a bounded prefix of src.
func parseRule(src string) (*rule, error) {
	r, err := parse(src)
	if err != nil {
		return nil, fmt.Errorf("%w: rule %s: %v", engine.ErrInvalidConfig, quotePrefix(src), err)
	}
	return r, nil
}

func parse(src string) (*rule, error) {
	if len(src) > maxRuleLen {
		return nil, fmt.Errorf("%d bytes, more than %d", len(src), maxRuleLen)
	}
	for i := 0; i < len(src); i++ {
		if c := src[i]; !strings.ContainsRune("id0123456789+-*/%() ", rune(c)) {
			return nil, fmt.Errorf("byte %q at offset %d: a rule holds id, integers, + - * / %%, parentheses and spaces", c, i)
		}
	}
	p := &ruleParser{src: src}
	r, err := p.sum()
	if err == nil && p.peek() != 0 {
		err = fmt.Errorf("unexpected %q at offset %d", p.src[p.i], p.i)
	}
	return r, err
}

// quotePrefix quotes s for an error, cut to its first 64 bytes.
func quotePrefix(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:most], len(s))
}

type ruleParser struct {
	src   string
	i     int
	depth int // parentheses open at i
}

// peek skips spaces and returns the next byte, 0 at the end (the text was
// checked to hold no NUL).
func (p *ruleParser) peek() byte {
	for p.i < len(p.src) && p.src[p.i] == ' ' {
		p.i++
	}
	if p.i == len(p.src) {
		return 0
	}
	return p.src[p.i]
}

func (p *ruleParser) sum() (*rule, error) {
	l, err := p.product()
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return l, nil
		}
		p.i++
		var r *rule
		if r, err = p.product(); err == nil {
			l = &rule{op: op, left: l, right: r}
		}
	}
	return nil, err
}

func (p *ruleParser) product() (*rule, error) {
	l, err := p.atom()
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return l, nil
		}
		p.i++
		var r *rule
		if r, err = p.atom(); err == nil {
			if (op == '/' || op == '%') && !r.isID && r.op == 0 && r.n <= 0 {
				return nil, fmt.Errorf("%c by %d (must be positive)", op, r.n)
			}
			l = &rule{op: op, left: l, right: r}
		}
	}
	return nil, err
}

func (p *ruleParser) atom() (*rule, error) {
	switch c := p.peek(); {
	case c == '(':
		if p.depth == maxRuleDepth {
			return nil, fmt.Errorf("parentheses nested deeper than %d at offset %d", maxRuleDepth, p.i)
		}
		p.i++
		p.depth++
		r, err := p.sum()
		p.depth--
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("missing ')' at offset %d", p.i)
		}
		p.i++
		return r, nil
	case strings.HasPrefix(p.src[p.i:], "id"):
		p.i += 2
		return &rule{isID: true}, nil
	case c == '-' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.src) && p.src[j] >= '0' && p.src[j] <= '9' {
			j++
		}
		n, err := strconv.ParseInt(p.src[p.i:j], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("number %q: %v", p.src[p.i:j], err)
		}
		p.i = j
		return &rule{n: n}, nil
	case c == 0:
		return nil, fmt.Errorf("unexpected end")
	default:
		return nil, fmt.Errorf("unexpected %q at offset %d", c, p.i)
	}
}

// eval computes the rule for id; ok is false on overflow or division by
// a non-positive number.
func (r *rule) eval(id int64) (v int64, ok bool) {
	switch {
	case r.isID:
		return id, true
	case r.op == 0:
		return r.n, true
	}
	a, ok := r.left.eval(id)
	if !ok {
		return 0, false
	}
	b, ok := r.right.eval(id)
	if !ok {
		return 0, false
	}
	switch r.op {
	case '+':
		return addChecked(a, b)
	case '-':
		if b == math.MinInt64 {
			return 0, false
		}
		return addChecked(a, -b)
	case '*':
		return mulChecked(a, b)
	case '/':
		if b <= 0 {
			return 0, false
		}
		return a / b, true
	default:
		if b <= 0 {
			return 0, false
		}
		return a % b, true
	}
}

// String prints the rule with the parentheses it needs, e.g. "(id+1)%4/2+1".
func (r *rule) String() string {
	s, _ := r.print()
	return s
}

// print returns the text and its precedence: 3 for a leaf, 2 for * / %,
// 1 for + -.
func (r *rule) print() (string, int) {
	switch {
	case r.isID:
		return "id", 3
	case r.op == 0:
		return strconv.FormatInt(r.n, 10), 3
	}
	p := 2
	if r.op == '+' || r.op == '-' {
		p = 1
	}
	l, lp := r.left.print()
	rs, rp := r.right.print()
	if lp < p {
		l = "(" + l + ")"
	}
	if rp <= p && r.right.op != 0 {
		rs = "(" + rs + ")"
	}
	return l + string(r.op) + rs, p
}

func addChecked(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

func mulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}
