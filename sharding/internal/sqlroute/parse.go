package sqlroute

import (
	"fmt"
	"strconv"
	"strings"

	sp "github.com/longbridgeapp/sqlparser"
)

// Statement is one statement read by [Parse]. Its methods do not change
// it: it may be used by several goroutines at once.
type Statement struct {
	// Kind is the statement's kind.
	Kind Kind
	// Table is the sharded table the statement touches; its Name is empty
	// when it touches none (see [Statement.Sharded]).
	Table Table
	// IDs are the values of the table's ID column: one per row of an
	// INSERT, or those the WHERE binds it to. Nil when unknown: the
	// INSERT names no such column or one of its rows has no plain value
	// there (DEFAULT, an expression), or nothing in the WHERE binds it.
	IDs []Value
	// Owners are the values of the table's Owner column, as IDs.
	Owners []Value
	// Assigned lists the routing columns an UPDATE sets, or an upsert sets
	// to something other than the inserted row's own value.
	Assigned []Assignment

	lx       *lexed
	args     []any
	refs     []int   // tokens naming the logical table
	binds    []int   // placeholder tokens, in order
	argOf    []int   // per placeholder, its index in args; -1 when named
	numbered bool    // placeholders are $n or ?n
	groups   []group // lists of routing values, for Narrow
}

// group is one list of routing values: the VALUES rows of an INSERT, or
// the elements of an IN (or the one value of an =).
type group struct {
	size  int
	items [][2]int // first and last token of each element; nil if not found
}

// Sharded reports whether the statement touches a sharded table.
func (s *Statement) Sharded() bool { return s.Table.Name != "" }

// Parse reads one statement with its args against the sharded tables.
// A statement that names none of them by an identifier is returned
// unsharded and unparsed, whatever it is. The statement keeps args (it
// does not change them) for its values and Narrow.
func Parse(query string, args []any, tables []Table) (*Statement, error) {
	for i, t := range tables {
		if err := checkTable(t); err != nil {
			return nil, err
		}
		for _, u := range tables[:i] {
			if strings.EqualFold(t.Name, u.Name) {
				return nil, tableError(ErrName, t.Name, "listed twice among the sharded tables")
			}
		}
	}
	lx, err := lex(query)
	if err != nil {
		if !namesWord(query, tables) {
			// Text this reader cannot cut, on other tables: not sharded.
			return &Statement{lx: &lexed{query: query}}, nil
		}
		return nil, err
	}
	st := &Statement{Kind: kindOf(lx), lx: lx, args: args}
	named := mentioned(lx, tables)
	if len(named) == 0 {
		return st, nil
	}
	first := named[0].Name
	for i, t := range lx.toks {
		if t.kind == tPunct && lx.text(i) == ";" && i != len(lx.toks)-1 {
			return nil, tableError(ErrMultipleStatements, first, "a second statement follows byte %d", t.start)
		}
	}
	for _, kw := range []string{"CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME"} {
		if lx.is(0, kw) {
			return nil, tableError(ErrDDL, first, "%s is run on each physical table, not through the logical one", kw)
		}
	}
	tree, err := parseTree(lx)
	if err != nil {
		return nil, tableError(ErrSyntax, first, "%v", err)
	}
	if err := st.read(tree, tables); err != nil {
		return nil, err
	}
	return st, nil
}

// checkTable refuses a Table whose names could not be matched as plain
// identifiers.
func checkTable(t Table) error {
	for _, n := range []struct{ what, name string }{{"table name", t.Name}, {"ID column", t.ID}} {
		if !plain(n.name) {
			return tableError(ErrName, t.Name, "%s %q", n.what, n.name)
		}
	}
	if t.Owner != "" && !plain(t.Owner) {
		return tableError(ErrName, t.Name, "owner column %q", t.Owner)
	}
	return nil
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func kindOf(lx *lexed) Kind {
	for k := Select; k <= Delete; k++ {
		if lx.is(0, k.String()) {
			return k
		}
	}
	return Other
}

// mentioned returns the tables named by some identifier of the
// statement, in the order they first appear.
func mentioned(lx *lexed, tables []Table) []Table {
	var out []Table
	seen := map[int]bool{}
	for i := range lx.toks {
		name, ok := lx.name(i)
		if !ok {
			continue
		}
		for j, t := range tables {
			if !seen[j] && strings.EqualFold(name, t.Name) {
				seen[j] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// namesWord reports whether query holds a table's name as a word, quoted
// or not: the test for a statement the lexer refused.
func namesWord(query string, tables []Table) bool {
	lower := strings.ToLower(query)
	for _, t := range tables {
		name := strings.ToLower(t.Name)
		for i := 0; ; {
			j := strings.Index(lower[i:], name)
			if j < 0 {
				break
			}
			at, end := i+j, i+j+len(name)
			if (at == 0 || !isWordByte(lower[at-1])) && (end == len(lower) || !isWordByte(lower[end])) {
				return true
			}
			i = end
		}
	}
	return false
}

// parseTree parses the statement's text, comments blanked and MySQL's
// VALUES(col) of ON DUPLICATE KEY UPDATE read as a call the parser knows.
// The parser panics on some inputs; that is a syntax error too.
func parseTree(lx *lexed) (tree sp.Statement, err error) {
	src := []byte(lx.query)
	for _, c := range lx.comments {
		for i := c[0]; i < c[1]; i++ {
			src[i] = ' '
		}
	}
	repl := map[int]string{}
	duplicate := false
	for i, t := range lx.toks {
		switch {
		case lx.is(i, "DUPLICATE"):
			duplicate = true
		case duplicate && lx.is(i, "VALUES") && lx.is(i+1, "("):
			repl[i] = `"VALUES"`
		case lx.is(i, "NOT") && lx.is(i-1, "IS"):
			// The parser reads IS NOT's right side down to OR: in
			// a = 1 AND b IS NOT NULL OR c = 1 it would take the OR
			// inside, and route by a. "NOT" + NULL stops where SQL does.
			repl[i] = `"NOT" +`
		case lx.is(i, "NOT") && afterOperand(lx, i) && likeWord(lx, i+1):
			// NOT LIKE (GLOB, REGEXP, MATCH) has the same flaw: read
			// it as LIKE "NOT" + pattern.
			repl[i] = ""
			repl[i+1] = lx.text(i+1) + ` "NOT" +`
		case lx.is(i, "NOT") && !lx.is(i+1, "EXISTS") && !afterOperand(lx, i):
			// The parser has no unary NOT but for NOT EXISTS. Read as
			// "NOT" + x it keeps its place between AND and OR and makes
			// x no binding of a routing column, which NOT x never is.
			repl[i] = `"NOT" +`
		case t.kind == tWord && sp.Lookup(lx.text(i)) != sp.IDENT && !grammarWord(lx, i):
			repl[i] = `"` + lx.text(i) + `"`
		}
	}
	text := ""
	if len(lx.toks) > 0 {
		text = lx.render(string(src), 0, len(lx.toks)-1, repl, nil)
	}
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("parser failed: %v", r)
		}
	}()
	return sp.NewParser(strings.NewReader(text)).ParseStatement()
}

// grammarWord reports whether the keyword at token i is one the parser's
// grammar reads there. Any other keyword of the parser's list (key, value,
// user, action, index, row...) is a column or alias name to the databases
// and is quoted for the parser, which takes no keyword as a bare name.
func grammarWord(lx *lexed, i int) bool {
	after := func(prev ...string) bool {
		for _, p := range prev {
			if lx.is(i-1, p) {
				return true
			}
		}
		return false
	}
	switch strings.ToUpper(lx.text(i)) {
	case "KEY":
		return after("DUPLICATE", "NO", "FOR")
	case "USER", "SYSTEM":
		return after("OVERRIDING")
	case "VALUE":
		return after("USER", "SYSTEM")
	case "FIRST", "LAST":
		return after("NULLS")
	case "NO":
		return after("FOR")
	case "SHARE":
		return after("FOR", "KEY")
	case "NOWAIT", "SKIP":
		return after("UPDATE", "SHARE")
	case "LOCKED":
		return after("SKIP")
	case "OF":
		return after("CURRENT")
	case "CURRENT":
		return after("WHERE")
	case "FILTER":
		return after(")")
	case "CONFLICT", "DUPLICATE":
		return after("ON")
	case "NOTHING":
		return after("DO")
	case "DEFAULT": // DEFAULT VALUES; GORM writes VALUES (?,DEFAULT) too
		return lx.is(i+1, "VALUES")
	case "SELECT", "DISTINCT", "ALL", "FROM", "WHERE", "GROUP", "BY", "HAVING", "UNION", "INTERSECT",
		"EXCEPT", "ORDER", "LIMIT", "OFFSET", "FOR", "UPDATE", "AS", "NATURAL", "LEFT", "OUTER", "INNER",
		"CROSS", "JOIN", "ON", "USING", "INSERT", "INTO", "VALUES", "DO", "SET", "RETURNING",
		"DELETE", "ONLY", "ASC", "DESC", "NULLS", "NULL", "TRUE", "FALSE", "CASE", "WHEN", "THEN", "ELSE",
		"END", "NOT", "EXISTS", "IN", "IS", "ISNULL", "NOTNULL", "LIKE", "GLOB", "REGEXP", "MATCH",
		"BETWEEN", "AND", "OR", "ESCAPE", "OVERRIDING", "CAST", "WITH", "RECURSIVE":
		return true
	}
	return false
}

func likeWord(lx *lexed, i int) bool {
	return lx.is(i, "LIKE") || lx.is(i, "GLOB") || lx.is(i, "REGEXP") || lx.is(i, "MATCH")
}

// afterOperand reports whether token i follows the end of an operand, as
// the NOT of NOT IN or IS NOT does.
func afterOperand(lx *lexed, i int) bool {
	if i == 0 {
		return false
	}
	switch lx.toks[i-1].kind {
	case tQuoted, tString, tNumber, tBind:
		return true
	case tPunct:
		return lx.is(i-1, ")")
	}
	w := lx.text(i - 1)
	if sp.Lookup(w) == sp.IDENT {
		return true
	}
	for _, kw := range []string{"NULL", "TRUE", "FALSE", "END", "IS"} {
		if strings.EqualFold(w, kw) {
			return true
		}
	}
	return false
}

// region replaces tokens first..last with text when rendering.
type region struct {
	first, last int
	text        string
}

// render returns src from token lo to token hi, with the tokens in repl
// and the region replaced; what lies between tokens is kept.
func (l *lexed) render(src string, lo, hi int, repl map[int]string, reg *region) string {
	if lo > hi {
		return ""
	}
	var b strings.Builder
	prev := l.toks[lo].start
	for i := lo; i <= hi; i++ {
		t := l.toks[i]
		b.WriteString(src[prev:t.start])
		switch r, ok := repl[i]; {
		case reg != nil && i == reg.first:
			b.WriteString(reg.text)
			i = reg.last
		case ok:
			b.WriteString(r)
		default:
			b.WriteString(src[t.start:t.end])
		}
		prev = l.toks[i].end
	}
	return b.String()
}

// read fills the statement from its tree.
func (s *Statement) read(tree sp.Statement, tables []Table) error {
	var found []*sp.TableName
	var foundTable []Table
	visit(tree, func(n sp.Node) {
		tn, ok := n.(*sp.TableName)
		if !ok || tn.Name == nil {
			return
		}
		for _, t := range tables {
			if strings.EqualFold(tn.Name.Name, t.Name) {
				found = append(found, tn)
				foundTable = append(foundTable, t)
			}
		}
	})
	switch len(found) {
	case 0:
		return nil // named only as a column or an alias
	case 1:
	default:
		if foundTable[0].Name == foundTable[1].Name {
			return tableError(ErrSeveralTables, foundTable[0].Name, "the table is read twice; each copy may be on another shard")
		}
		return tableError(ErrSeveralTables, foundTable[0].Name, "joined with sharded table %s", foundTable[1].Name)
	}
	s.Table = foundTable[0]
	tn := found[0]
	if err := s.findRefs(tree, tn); err != nil {
		return err
	}
	if err := s.readBinds(tree); err != nil {
		return err
	}
	s.route(tree, tn)
	return nil
}

// findRefs finds the tokens to replace: the table's name where a table
// stands and where it qualifies a column. The tables the text walk finds
// must be the tree's, in the same order, and the qualified columns as
// many, so that what is replaced is what the parser read.
func (s *Statement) findRefs(tree sp.Statement, tn *sp.TableName) error {
	name := s.Table.Name
	wantQualified := 0
	var tables []*sp.TableName
	var shadow string
	visit(tree, func(n sp.Node) {
		switch n := n.(type) {
		case *sp.QualifiedRef:
			if n.Table != nil && strings.EqualFold(n.Table.Name, name) {
				wantQualified++
			}
		case *sp.TableName:
			tables = append(tables, n)
			if n != tn && n.Alias != nil && strings.EqualFold(n.Alias.Name, name) {
				shadow = n.Name.Name
			}
		case *sp.ParenSource:
			if n.Alias != nil && strings.EqualFold(n.Alias.Name, name) {
				shadow = "a subquery"
			}
		}
	})
	if shadow != "" {
		return tableError(ErrUnsupported, name, "%s is aliased as the logical table", shadow)
	}
	lx := s.lx
	var at []int // tokens where a table stands
	qualified := 0
	from := map[int]bool{} // depths at which a FROM list is open
	for i, t := range lx.toks {
		switch {
		case lx.is(i, "("):
			from[t.depth+1] = false
		case lx.is(i, "FROM"):
			from[t.depth] = true
		case isClause(lx, i):
			from[t.depth] = false
		}
		n, ok := lx.name(i)
		if !ok || lx.is(i-1, ".") {
			continue
		}
		switch {
		case lx.is(i+1, "."):
			if strings.EqualFold(n, name) {
				qualified++
				s.refs = append(s.refs, i)
			}
		case tablePosition(lx, i) || (lx.is(i-1, ",") && from[t.depth]):
			at = append(at, i)
		}
	}
	if len(at) != len(tables) || qualified != wantQualified {
		return tableError(ErrUnsupported, name, "the text shows %d tables and %d columns qualified by the table; the parser reads %d and %d",
			len(at), qualified, len(tables), wantQualified)
	}
	for k, tok := range at {
		n, _ := lx.name(tok)
		if !strings.EqualFold(n, tables[k].Name.Name) {
			return tableError(ErrUnsupported, name, "the text shows table %s where the parser reads %s", n, tables[k].Name.Name)
		}
		if tables[k] == tn {
			s.refs = append(s.refs, tok)
		}
	}
	return nil
}

// tablePosition reports whether the name at token i follows a keyword
// that a table name follows: FROM, JOIN, DELETE FROM ONLY, and the
// statement's own INSERT [INTO] or UPDATE (not ON DUPLICATE KEY UPDATE).
func tablePosition(lx *lexed, i int) bool {
	switch {
	case lx.is(i-1, "FROM"), lx.is(i-1, "JOIN"), lx.is(i-1, "ONLY") && lx.is(i-2, "FROM"):
		return true
	case i == 1:
		return (lx.is(0, "INSERT") && !lx.is(1, "INTO")) || lx.is(0, "UPDATE")
	case i == 2:
		return lx.is(0, "INSERT") && lx.is(1, "INTO")
	}
	return false
}

// isClause reports whether token i starts a clause that ends a FROM list.
func isClause(lx *lexed, i int) bool {
	for _, kw := range []string{"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION", "INTERSECT",
		"EXCEPT", "ON", "USING", "SET", "RETURNING", "FOR", "WINDOW", "VALUES", "SELECT"} {
		if lx.is(i, kw) {
			return true
		}
	}
	return false
}

// readBinds numbers the placeholders and checks them against the tree and
// the args.
func (s *Statement) readBinds(tree sp.Statement) error {
	name := s.Table.Name
	lx := s.lx
	positional, maxNumber := 0, 0
	for i, t := range lx.toks {
		if t.kind != tBind {
			continue
		}
		text := lx.text(i)
		s.binds = append(s.binds, i)
		switch n, err := strconv.Atoi(text[1:]); {
		case text == "?":
			s.argOf = append(s.argOf, positional)
			positional++
		case (text[0] == '?' || text[0] == '$') && err == nil && n >= 1:
			s.argOf = append(s.argOf, n-1)
			s.numbered = true
			maxNumber = max(maxNumber, n)
		default:
			s.argOf = append(s.argOf, -1)
		}
	}
	if positional > 0 && s.numbered {
		return tableError(ErrUnsupported, name, "mixes ? and numbered placeholders")
	}
	if positional > 0 && positional != len(s.args) {
		return tableError(ErrArgs, name, "%d placeholders, %d args", positional, len(s.args))
	}
	if s.numbered && maxNumber != len(s.args) {
		return tableError(ErrArgs, name, "placeholders up to %d, %d args", maxNumber, len(s.args))
	}
	var bad error
	visit(tree, func(n sp.Node) {
		b, ok := n.(*sp.BindExpr)
		if ok && bad == nil && (b.Pos >= len(s.binds) || lx.text(s.binds[b.Pos]) != b.Name) {
			bad = tableError(ErrUnsupported, name, "placeholder %s is not where the parser reads it", b.Name)
		}
	})
	return bad
}

// route reads the routing values and the assignments of routing columns.
func (s *Statement) route(tree sp.Statement, tn *sp.TableName) {
	qualifiers := []string{s.Table.Name}
	if tn.Alias != nil {
		qualifiers = append(qualifiers, tn.Alias.Name)
	}
	cols := []string{s.Table.ID, s.Table.Owner}
	lists := []*[]Value{&s.IDs, &s.Owners}
	switch t := tree.(type) {
	case *sp.InsertStatement:
		rows := s.valuesRows(len(t.Expressions))
		for c, col := range cols {
			*lists[c] = s.insertValues(t, col, rows)
		}
		if t.UpsertClause != nil {
			s.assigned(t.UpsertClause.Assignments)
		}
	case *sp.SelectStatement:
		if t.Compound == nil && topSource(t.FromItems, tn) {
			s.where(t.Condition, cols, lists, qualifiers)
		}
	case *sp.UpdateStatement:
		s.where(t.Condition, cols, lists, qualifiers)
		s.assigned(t.Assignments)
	case *sp.DeleteStatement:
		s.where(t.Condition, cols, lists, qualifiers)
	}
}

// topSource reports whether tn is a source of the statement itself, not
// of a subquery.
func topSource(src sp.Source, tn *sp.TableName) bool {
	switch src := src.(type) {
	case *sp.TableName:
		return src == tn
	case *sp.JoinClause:
		return topSource(src.X, tn) || topSource(src.Y, tn)
	case *sp.ParenSource:
		return topSource(src.X, tn)
	}
	return false
}

// insertValues returns column col of every VALUES row, nil unless all are
// known.
func (s *Statement) insertValues(t *sp.InsertStatement, col string, rows *group) []Value {
	at := -1
	for i, c := range t.ColumnNames {
		if col != "" && strings.EqualFold(c.Name, col) {
			at = i
		}
	}
	if at < 0 || len(t.Expressions) == 0 {
		return nil
	}
	g := len(s.groups)
	var out []Value
	for r, row := range t.Expressions {
		if at >= len(row.Exprs) {
			return nil
		}
		v, ok := s.resolve(row.Exprs[at])
		if !ok {
			return nil
		}
		v.from, v.group, v.item = s, g, r
		out = append(out, v)
	}
	s.groups = append(s.groups, *rows)
	return out
}

// valuesRows finds the token range of each VALUES row; nil items when the
// text does not show n rows after VALUES.
func (s *Statement) valuesRows(n int) *group {
	lx := s.lx
	g := &group{size: n}
	i := 0
	for i < len(lx.toks) && !(lx.is(i, "VALUES") && lx.toks[i].depth == 0) {
		i++
	}
	var items [][2]int
	for i++; lx.is(i, "("); i += 2 {
		end := lx.toks[i].match
		items = append(items, [2]int{i, end})
		i = end
		if !lx.is(i+1, ",") {
			break
		}
	}
	if len(items) == n {
		g.items = items
	}
	return g
}

// where reads, for each routing column, the first AND term of cond that
// binds it to known values. A WHERE whose own text holds an OR binds
// nothing, whatever the parser made of it: OR is the lowest operator of
// SQL, so the condition is an OR at the top.
func (s *Statement) where(cond sp.Expr, cols []string, lists []*[]Value, qualifiers []string) {
	if whereHasOr(s.lx) {
		return
	}
	terms := sp.SplitExprTree(cond)
	for c, col := range cols {
		if col == "" {
			continue
		}
		for _, term := range terms {
			if vs := s.binding(term, col, qualifiers); vs != nil {
				*lists[c] = vs
				break
			}
		}
	}
}

// whereHasOr reports whether the statement's own WHERE (at depth 0) holds
// OR, or || (MySQL's OR; a concatenation elsewhere, whose loss is only a
// fan-out), outside parentheses and CASE.
func whereHasOr(lx *lexed) bool {
	in, cases := false, 0
	for i, t := range lx.toks {
		if t.depth != 0 {
			continue
		}
		switch {
		case lx.is(i, "WHERE"):
			in = true
		case !in:
		case lx.is(i, "CASE"):
			cases++
		case lx.is(i, "END") && cases > 0:
			cases--
		case cases > 0:
		case lx.is(i, "OR"),
			lx.is(i, "|") && lx.is(i+1, "|") && lx.toks[i+1].start == t.end:
			return true
		case endsWhere(lx, i):
			in = false
		}
	}
	return false
}

// endsWhere reports whether token i starts a clause that follows WHERE.
func endsWhere(lx *lexed, i int) bool {
	for _, kw := range []string{"GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "OFFSET", "UNION",
		"INTERSECT", "EXCEPT", "RETURNING", "FOR"} {
		if lx.is(i, kw) {
			return true
		}
	}
	return false
}

// binding returns the values term binds col to: key = v, v = key or
// key IN (v, ...); nil for any other term.
func (s *Statement) binding(term sp.Expr, col string, qualifiers []string) []Value {
	b, ok := term.(*sp.BinaryExpr)
	if !ok {
		return nil
	}
	var elems []sp.Expr
	switch {
	case b.Op == sp.EQ && isColumn(b.X, col, qualifiers):
		elems = []sp.Expr{b.Y}
	case b.Op == sp.EQ && isColumn(b.Y, col, qualifiers):
		elems = []sp.Expr{b.X}
	case b.Op == sp.IN && isColumn(b.X, col, qualifiers):
		list, ok := b.Y.(*sp.Exprs)
		if !ok {
			return nil
		}
		elems = list.Exprs
	default:
		return nil
	}
	if len(elems) == 0 {
		return nil
	}
	g := len(s.groups)
	out := make([]Value, 0, len(elems))
	for i, e := range elems {
		v, ok := s.resolve(e)
		if !ok {
			return nil
		}
		v.from, v.group, v.item = s, g, i
		out = append(out, v)
	}
	s.groups = append(s.groups, s.listItems(elems))
	return out
}

// listItems finds the token range of each element of an IN list from a
// placeholder among them; nil items when none is a placeholder or the
// text does not match. One value needs none: Narrow keeps it whole.
func (s *Statement) listItems(elems []sp.Expr) group {
	g := group{size: len(elems)}
	lx := s.lx
	if len(elems) == 1 {
		return g
	}
	for at, e := range elems {
		b, ok := e.(*sp.BindExpr)
		if !ok {
			continue
		}
		tok := s.binds[b.Pos]
		d := lx.toks[tok].depth
		open := tok - 1
		for open >= 0 && !(lx.is(open, "(") && lx.toks[open].depth == d-1) {
			open--
		}
		if open < 0 {
			return g
		}
		var items [][2]int
		start := open + 1
		end := lx.toks[open].match
		for j := start; j <= end; j++ {
			if j == end || (lx.toks[j].depth == d && lx.is(j, ",")) {
				items = append(items, [2]int{start, j - 1})
				start = j + 1
			}
		}
		if len(items) == len(elems) && items[at][0] == tok && items[at][1] == tok {
			g.items = items
		}
		return g
	}
	return g
}

// isColumn reports whether e is column col, bare or qualified by the
// table or its alias.
func isColumn(e sp.Expr, col string, qualifiers []string) bool {
	switch e := e.(type) {
	case *sp.Ident:
		return strings.EqualFold(e.Name, col)
	case *sp.QualifiedRef:
		if e.Star || e.Column == nil || e.Table == nil || !strings.EqualFold(e.Column.Name, col) {
			return false
		}
		for _, q := range qualifiers {
			if strings.EqualFold(e.Table.Name, q) {
				return true
			}
		}
	case *sp.ParenExpr:
		return isColumn(e.X, col, qualifiers)
	}
	return false
}

// resolve returns the value of a placeholder or literal.
func (s *Statement) resolve(e sp.Expr) (Value, bool) {
	switch e := e.(type) {
	case *sp.ParenExpr:
		return s.resolve(e.X)
	case *sp.BindExpr:
		arg := s.argOf[e.Pos]
		if arg < 0 || arg >= len(s.args) {
			return Value{}, false
		}
		return Value{Value: s.args[arg], Arg: arg}, true
	case *sp.StringLit:
		return Value{Value: e.Value, Arg: -1}, true
	case *sp.NumberLit:
		n, err := strconv.ParseInt(e.Value, 10, 64)
		return Value{Value: n, Arg: -1}, err == nil
	case *sp.UnaryExpr:
		lit, ok := e.X.(*sp.NumberLit)
		if !ok || (e.Op != sp.MINUS && e.Op != sp.PLUS) {
			return Value{}, false
		}
		text := lit.Value
		if e.Op == sp.MINUS {
			text = "-" + text
		}
		n, err := strconv.ParseInt(text, 10, 64)
		return Value{Value: n, Arg: -1}, err == nil
	}
	return Value{}, false
}

// assigned records the routing columns set by as. Setting a column to the
// inserted row's own value (excluded.col, VALUES(col)) moves nothing and
// is left out.
func (s *Statement) assigned(as []*sp.Assignment) {
	for _, a := range as {
		for _, c := range a.Columns {
			for _, col := range []string{s.Table.ID, s.Table.Owner} {
				if col == "" || !strings.EqualFold(c.Name, col) || insertedValue(a.Expr, col) {
					continue
				}
				v, ok := s.resolve(a.Expr)
				if !ok || len(a.Columns) > 1 {
					v = Value{Arg: -1}
				}
				s.Assigned = append(s.Assigned, Assignment{Column: col, Value: v})
			}
		}
	}
}

// insertedValue reports whether e is the inserted row's value of col:
// excluded.col (PostgreSQL, SQLite) or VALUES(col) (MySQL), or col itself
// (GORM's no-op `id`=`id`).
func insertedValue(e sp.Expr, col string) bool {
	switch e := e.(type) {
	case *sp.Ident:
		return strings.EqualFold(e.Name, col)
	case *sp.QualifiedRef:
		return e.Table != nil && e.Column != nil && strings.EqualFold(e.Table.Name, "excluded") && strings.EqualFold(e.Column.Name, col)
	case *sp.Call:
		return e.Name != nil && strings.EqualFold(e.Name.Name, "VALUES") && len(e.Args) == 1 && isColumn(e.Args[0], col, nil)
	}
	return false
}
