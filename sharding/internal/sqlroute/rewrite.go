package sqlroute

import (
	"slices"
	"strconv"
	"strings"
)

// Rewrite returns the statement's text with each reference to the logical
// table replaced by physical, quoted as the reference was; an unsharded
// statement comes back as sent.
func (s *Statement) Rewrite(physical string) (string, error) {
	if !s.Sharded() {
		return s.lx.query, nil
	}
	repl, err := s.tableRepl(physical)
	if err != nil {
		return "", err
	}
	return s.whole(repl, nil), nil
}

// Narrow returns the statement for the shard of keep, a non-empty subset
// of one of IDs or Owners: like Rewrite, with an INSERT's VALUES rows or a
// WHERE's IN list cut down to keep's, and the args cut down to match
// (numbered placeholders renumbered). It is [ErrUnsupported] when an IN
// list holds no placeholder and keep is not all of it; the caller then
// sends Rewrite's text to the shard.
func (s *Statement) Narrow(physical string, keep []Value) (string, []any, error) {
	if !s.Sharded() {
		return "", nil, tableError(ErrSelection, "statement", "it touches no sharded table")
	}
	if len(keep) == 0 {
		return "", nil, tableError(ErrSelection, s.Table.Name, "nothing to keep")
	}
	g := keep[0].group
	for _, v := range keep {
		if v.from != s {
			return "", nil, tableError(ErrSelection, s.Table.Name, "value not from this statement")
		}
	}
	grp := s.groups[g]
	kept := make([]bool, grp.size)
	for _, v := range keep {
		if v.group != g {
			return "", nil, tableError(ErrSelection, s.Table.Name, "values from different lists")
		}
		kept[v.item] = true
	}
	repl, err := s.tableRepl(physical)
	if err != nil {
		return "", nil, err
	}
	if !slices.Contains(kept, false) {
		return s.whole(repl, nil), slices.Clone(s.args), nil
	}
	if grp.items == nil {
		return "", nil, tableError(ErrUnsupported, s.Table.Name, "the list's elements are not found in the text (none is a placeholder); send the whole statement")
	}
	dropped := map[int]bool{} // tokens of the elements cut
	for i, it := range grp.items {
		if kept[i] {
			continue
		}
		for t := it[0]; t <= it[1]; t++ {
			dropped[t] = true
		}
	}
	args, err := s.renumber(dropped, repl)
	if err != nil {
		return "", nil, err
	}
	items := grp.items
	sep := s.lx.query[s.lx.toks[items[0][1]].end:s.lx.toks[items[1][0]].start]
	var parts []string
	for i, it := range items {
		if kept[i] {
			parts = append(parts, s.lx.render(s.lx.query, it[0], it[1], repl, nil))
		}
	}
	reg := &region{first: items[0][0], last: items[len(items)-1][1], text: strings.Join(parts, sep)}
	return s.whole(repl, reg), args, nil
}

// renumber returns the args of the placeholders left when the dropped
// tokens are cut, and renumbers numbered placeholders through repl.
func (s *Statement) renumber(dropped map[int]bool, repl map[int]string) ([]any, error) {
	used := make([]bool, len(s.args))
	var order []int // args of the ? placeholders left, in order
	for p, tok := range s.binds {
		if dropped[tok] {
			continue
		}
		arg := s.argOf[p]
		if arg < 0 {
			return nil, tableError(ErrUnsupported, s.Table.Name, "named placeholder %s", s.lx.text(tok))
		}
		used[arg] = true
		order = append(order, arg)
	}
	var args []any
	if !s.numbered {
		for _, a := range order {
			args = append(args, s.args[a])
		}
		return args, nil
	}
	newNum := make([]int, len(s.args))
	for a, u := range used {
		if u {
			args = append(args, s.args[a])
			newNum[a] = len(args)
		}
	}
	for p, tok := range s.binds {
		if !dropped[tok] {
			repl[tok] = s.lx.text(tok)[:1] + strconv.Itoa(newNum[s.argOf[p]])
		}
	}
	return args, nil
}

// tableRepl maps each table reference's token to the physical name.
func (s *Statement) tableRepl(physical string) (map[int]string, error) {
	if !plain(physical) {
		return nil, tableError(ErrName, s.Table.Name, "physical table %q", physical)
	}
	repl := make(map[int]string, len(s.refs))
	for _, i := range s.refs {
		if t := s.lx.toks[i]; t.kind == tQuoted {
			q := s.lx.query[t.start : t.start+1]
			repl[i] = q + physical + q
		} else {
			repl[i] = physical
		}
	}
	return repl, nil
}

// whole renders the whole statement, what precedes and follows its
// tokens included.
func (s *Statement) whole(repl map[int]string, reg *region) string {
	lx := s.lx
	n := len(lx.toks)
	return lx.query[:lx.toks[0].start] + lx.render(lx.query, 0, n-1, repl, reg) + lx.query[lx.toks[n-1].end:]
}
