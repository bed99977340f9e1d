package shardgorm

import (
	"slices"
	"testing"

	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// TestPluginExprKeys reads the routing conditions of string Wheres as
// GORM holds them, and nothing from conditions that may not hold.
func TestPluginExprKeys(t *testing.T) {
	id := &schema.Field{Name: "ID", DBName: "id"}
	owner := &schema.Field{Name: "UserID", DBName: "user_id"}
	m := &pmodel{schema: &schema.Schema{Name: "Order", Table: "orders"}, key: owner, id: id, idsRoute: true}
	cases := []struct {
		sql  string
		vars []any
		want [][]int64
	}{
		{"id = ?", []any{7}, [][]int64{{7}}},
		{"user_id IN ?", []any{[]int64{1, 2}}, [][]int64{{1, 2}}},
		{"`orders`.`id` IN (?)", []any{[]any{3, int32(4)}}, [][]int64{{3, 4}}},
		{`"orders"."user_id" = ?`, []any{uint(5)}, [][]int64{{5}}},
		{"status = ? AND user_id = ? AND id IN ?", []any{"x", 9, []int{10}}, [][]int64{{9}, {10}}},
		{"created_at BETWEEN ? AND ? AND id = ?", []any{1, 2, 11}, [][]int64{{11}}},
		{"other.id = ?", []any{1}, nil},              // another table's column
		{"status = ? OR id = ?", []any{"x", 1}, nil}, // may not hold
		{"id = ? AND\nNOT deleted", []any{1}, nil},   // NOT: read nothing
		{"id = ?", []any{"1"}, nil},                  // text is no key
		{"id = ? || status = ?", []any{1, "x"}, nil}, // MySQL's OR
		{"id = ? XOR status = ?", []any{1, "x"}, nil},
		{"id = ? AND !deleted", []any{1}, nil},
		{"id = ? AND status != ?", []any{1, "x"}, [][]int64{{1}}},
		{"id = @id", []any{map[string]any{"id": 1}}, nil},
		{"id > ?", []any{1}, nil},
		{"product_id = ?", []any{1}, nil},
	}
	for _, c := range cases {
		if got := m.exprKeys(c.sql, c.vars); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%q %v: keys %v, want %v", c.sql, c.vars, got, c.want)
		}
	}
	// Structured conditions: GORM's Eq and IN, on the primary key too.
	exprs := []clause.Expression{
		clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: "user_id"}, Value: int64(3)},
		clause.IN{Column: clause.PrimaryColumn, Values: []any{int64(4), int64(8)}},
		clause.AndConditions{Exprs: []clause.Expression{clause.Expr{SQL: "id = ?", Vars: []any{12}}}},
		clause.Eq{Column: clause.Column{Table: "items", Name: "id"}, Value: 5},
	}
	m.schema.PrioritizedPrimaryField = id
	got := (&Plugin{}).whereKeys(m, exprs)
	if want := [][]int64{{3}, {4, 8}, {12}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("structured keys %v, want %v", got, want)
	}
	// An Or among them joins them all with OR: nothing routes.
	exprs = append(exprs, clause.OrConditions{Exprs: []clause.Expression{clause.Eq{Column: "id", Value: 1}}})
	if got := (&Plugin{}).whereKeys(m, exprs); got != nil {
		t.Errorf("keys under OR %v, want none", got)
	}
}
