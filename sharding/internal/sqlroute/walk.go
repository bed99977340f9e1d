package sqlroute

import sp "github.com/longbridgeapp/sqlparser"

// visit calls fn on n and every node below it, subqueries included. It
// reaches more of the tree than the parser's own Walk (RETURNING lists,
// upsert clauses, join constraints), which the rewrite's check relies on.
func visit(n sp.Node, fn func(sp.Node)) {
	if isNil(n) {
		return
	}
	fn(n)
	exprs := func(xs []sp.Expr) {
		for _, x := range xs {
			visit(x, fn)
		}
	}
	switch n := n.(type) {
	case *sp.SelectStatement:
		visit(n.Columns, fn)
		visit(n.FromItems, fn)
		visit(n.Condition, fn)
		exprs(n.GroupingElements)
		visit(n.HavingCondition, fn)
		visit(n.Compound, fn)
		for _, t := range n.OrderBy {
			visit(t, fn)
		}
		visit(n.Limit, fn)
		visit(n.Offset, fn)
	case *sp.InsertStatement:
		visit(n.TableName, fn)
		for _, row := range n.Expressions {
			visit(row, fn)
		}
		visit(n.Query, fn)
		visit(n.UpsertClause, fn)
		visit(n.OutputExpressions, fn)
	case *sp.UpdateStatement:
		visit(n.TableName, fn)
		for _, a := range n.Assignments {
			visit(a, fn)
		}
		for _, t := range n.FromList {
			visit(t, fn)
		}
		visit(n.Condition, fn)
		visit(n.OutputExpressions, fn)
	case *sp.DeleteStatement:
		visit(n.TableName, fn)
		for _, t := range n.UsingList {
			visit(t, fn)
		}
		visit(n.Condition, fn)
		visit(n.OutputExpressions, fn)
	case *sp.UpsertClause:
		for _, c := range n.Columns {
			visit(c, fn)
		}
		visit(n.WhereExpr, fn)
		for _, a := range n.Assignments {
			visit(a, fn)
		}
		visit(n.UpdateWhereExpr, fn)
	case *sp.OutputNames:
		for _, c := range *n {
			visit(c, fn)
		}
	case *sp.ResultColumn:
		visit(n.Expr, fn)
	case *sp.OrderingTerm:
		visit(n.X, fn)
	case *sp.IndexedColumn:
		visit(n.X, fn)
	case *sp.Assignment:
		visit(n.Expr, fn)
	case *sp.JoinClause:
		visit(n.X, fn)
		visit(n.Y, fn)
		visit(n.Constraint, fn)
	case *sp.OnConstraint:
		visit(n.X, fn)
	case *sp.ParenSource:
		visit(n.X, fn)
	case *sp.ParenExpr:
		visit(n.X, fn)
	case *sp.UnaryExpr:
		visit(n.X, fn)
	case *sp.BinaryExpr:
		visit(n.X, fn)
		visit(n.Y, fn)
	case *sp.Exprs:
		exprs(n.Exprs)
	case *sp.Range:
		visit(n.X, fn)
		visit(n.Y, fn)
	case *sp.Call:
		exprs(n.Args)
		visit(n.Filter, fn)
	case *sp.FilterClause:
		visit(n.X, fn)
	case *sp.CaseExpr:
		visit(n.Operand, fn)
		for _, b := range n.Blocks {
			visit(b, fn)
		}
		visit(n.ElseExpr, fn)
	case *sp.CaseBlock:
		visit(n.Condition, fn)
		visit(n.Body, fn)
	case *sp.Exists:
		visit(n.Select, fn)
	}
}

// isNil reports whether n is nil, typed or not: the tree holds optional
// parts as typed nil pointers inside interfaces.
func isNil(n sp.Node) bool {
	switch n := n.(type) {
	case nil:
		return true
	case *sp.SelectStatement:
		return n == nil
	case *sp.TableName:
		return n == nil
	case *sp.UpsertClause:
		return n == nil
	case *sp.OutputNames:
		return n == nil
	case *sp.FilterClause:
		return n == nil
	case *sp.OnConstraint:
		return n == nil
	case *sp.UsingConstraint:
		return n == nil
	case *sp.Exprs:
		return n == nil
	}
	return false
}
