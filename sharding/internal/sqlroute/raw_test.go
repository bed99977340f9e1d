package sqlroute

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestRaw reads SQL as users write it and checks the routing values and
// the rewrite to orders_7.
func TestRaw(t *testing.T) {
	cases := []struct {
		name     string
		query    string
		args     []any
		kind     Kind
		ids      []any
		owners   []any
		rewrite  string
		assigned []Assignment
	}{
		{name: "plain owner", query: "SELECT * FROM orders WHERE user_id = ?", args: []any{7},
			kind: Select, owners: []any{7}, rewrite: "SELECT * FROM orders_7 WHERE user_id = ?"},
		{name: "lower case", query: "select id, amount from orders where user_id = ? and id in (?, ?)", args: []any{7, 1, 2},
			kind: Select, ids: []any{1, 2}, owners: []any{7},
			rewrite: "select id, amount from orders_7 where user_id = ? and id in (?, ?)"},
		{name: "mixed case table", query: "SELECT * FROM Orders WHERE ID = ?", args: []any{3},
			kind: Select, ids: []any{3}, rewrite: "SELECT * FROM orders_7 WHERE ID = ?"},
		{name: "alias", query: "SELECT o.id FROM orders o WHERE o.user_id = ? ORDER BY o.id DESC LIMIT 5", args: []any{7},
			kind: Select, owners: []any{7}, rewrite: "SELECT o.id FROM orders_7 o WHERE o.user_id = ? ORDER BY o.id DESC LIMIT 5"},
		{name: "alias with AS", query: "SELECT o.* FROM orders AS o WHERE ? = o.user_id", args: []any{7},
			kind: Select, owners: []any{7}, rewrite: "SELECT o.* FROM orders_7 AS o WHERE ? = o.user_id"},
		{name: "qualified by table", query: "SELECT orders.* FROM orders WHERE orders.id = 42", kind: Select,
			ids: []any{int64(42)}, rewrite: "SELECT orders_7.* FROM orders_7 WHERE orders_7.id = 42"},
		{name: "literals", query: "SELECT * FROM orders WHERE id IN (1, -2, +3) AND user_id = 'u1'", kind: Select,
			ids: []any{int64(1), int64(-2), int64(3)}, owners: []any{"u1"},
			rewrite: "SELECT * FROM orders_7 WHERE id IN (1, -2, +3) AND user_id = 'u1'"},
		{name: "parenthesised terms", query: "SELECT * FROM orders WHERE (user_id = ?) AND ((id = ?))", args: []any{7, 8},
			kind: Select, ids: []any{8}, owners: []any{7},
			rewrite: "SELECT * FROM orders_7 WHERE (user_id = ?) AND ((id = ?))"},
		{name: "or inside and", query: "SELECT * FROM orders WHERE user_id = ? AND (id = ? OR id = ?)", args: []any{7, 1, 2},
			kind: Select, owners: []any{7}, rewrite: "SELECT * FROM orders_7 WHERE user_id = ? AND (id = ? OR id = ?)"},
		{name: "first binding term wins", query: "SELECT * FROM orders WHERE user_id IN (?, ?) AND user_id = ?", args: []any{1, 2, 2},
			kind: Select, owners: []any{1, 2}, rewrite: "SELECT * FROM orders_7 WHERE user_id IN (?, ?) AND user_id = ?"},
		{name: "or at the top", query: "SELECT * FROM orders WHERE user_id = ? OR user_id = ?", args: []any{1, 2},
			kind: Select, rewrite: "SELECT * FROM orders_7 WHERE user_id = ? OR user_id = ?"},
		{name: "not in", query: "SELECT * FROM orders WHERE user_id NOT IN (?)", args: []any{1},
			kind: Select, rewrite: "SELECT * FROM orders_7 WHERE user_id NOT IN (?)"},
		{name: "range", query: "SELECT * FROM orders WHERE id > ? AND id BETWEEN 1 AND 9", args: []any{1},
			kind: Select, rewrite: "SELECT * FROM orders_7 WHERE id > ? AND id BETWEEN 1 AND 9"},
		{name: "function of the key", query: "SELECT * FROM orders WHERE abs(user_id) = ?", args: []any{1},
			kind: Select, rewrite: "SELECT * FROM orders_7 WHERE abs(user_id) = ?"},
		{name: "key against a column", query: "SELECT * FROM orders WHERE user_id = amount", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE user_id = amount"},
		{name: "other table's column", query: "SELECT * FROM orders o JOIN users u ON u.id = o.user_id WHERE u.id = ?", args: []any{1},
			kind: Select, rewrite: "SELECT * FROM orders_7 o JOIN users u ON u.id = o.user_id WHERE u.id = ?"},
		{name: "join routed by the sharded side", query: "SELECT * FROM users u JOIN orders o ON u.id = o.user_id WHERE o.user_id = ?",
			args: []any{1}, kind: Select, owners: []any{1},
			rewrite: "SELECT * FROM users u JOIN orders_7 o ON u.id = o.user_id WHERE o.user_id = ?"},
		{name: "comma join", query: "SELECT * FROM users, orders WHERE orders.user_id = users.id AND orders.user_id = ?",
			args: []any{4}, kind: Select, owners: []any{4},
			rewrite: "SELECT * FROM users, orders_7 WHERE orders_7.user_id = users.id AND orders_7.user_id = ?"},
		{name: "subquery only", query: "SELECT * FROM users WHERE EXISTS (SELECT 1 FROM orders WHERE orders.user_id = users.id AND user_id = ?)",
			args: []any{4}, kind: Select,
			rewrite: "SELECT * FROM users WHERE EXISTS (SELECT 1 FROM orders_7 WHERE orders_7.user_id = users.id AND user_id = ?)"},
		{name: "named placeholder", query: "SELECT * FROM orders WHERE user_id = :uid", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE user_id = :uid"},
		{name: "column named like the table", query: "SELECT orders FROM orders WHERE 'orders' <> orders AND id = ?", args: []any{1},
			kind: Select, ids: []any{1}, rewrite: "SELECT orders FROM orders_7 WHERE 'orders' <> orders AND id = ?"},
		{name: "comments kept", query: "/* list */ SELECT * -- all\nFROM `orders` /* t */ WHERE `user_id` = ? ;", args: []any{1},
			kind: Select, owners: []any{1}, rewrite: "/* list */ SELECT * -- all\nFROM `orders_7` /* t */ WHERE `user_id` = ? ;"},
		{name: "comment names the table", query: "SELECT * FROM orders -- from orders\n", kind: Select,
			rewrite: "SELECT * FROM orders_7 -- from orders\n"},
		{name: "optimizer hint", query: "SELECT /*+ MAX_EXECUTION_TIME(100) */ * FROM `orders` WHERE `id` = ?", args: []any{1},
			kind: Select, ids: []any{1}, rewrite: "SELECT /*+ MAX_EXECUTION_TIME(100) */ * FROM `orders_7` WHERE `id` = ?"},
		{name: "comment at the end", query: "DELETE FROM orders WHERE id = 1 --", kind: Delete,
			ids: []any{int64(1)}, rewrite: "DELETE FROM orders_7 WHERE id = 1 --"},
		{name: "mysql limit comma", query: "SELECT * FROM `orders` WHERE `user_id` = ? LIMIT 10, 20", args: []any{1},
			kind: Select, owners: []any{1}, rewrite: "SELECT * FROM `orders_7` WHERE `user_id` = ? LIMIT 10, 20"},
		{name: "insert without INTO", query: "INSERT orders (id, user_id) VALUES (1, 2)", kind: Insert,
			ids: []any{int64(1)}, owners: []any{int64(2)}, rewrite: "INSERT orders_7 (id, user_id) VALUES (1, 2)"},
		{name: "insert unknown value", query: "INSERT INTO orders (id, user_id) VALUES (?, ?), (now(), ?)", args: []any{1, 2, 3},
			kind: Insert, owners: []any{2, 3}, rewrite: "INSERT INTO orders_7 (id, user_id) VALUES (?, ?), (now(), ?)"},
		{name: "insert select", query: `INSERT INTO "orders" ("id") SELECT "id" FROM "drafts"`, kind: Insert,
			rewrite: `INSERT INTO "orders_7" ("id") SELECT "id" FROM "drafts"`},
		{name: "sqlite numbered", query: "UPDATE orders SET amount = ?2 WHERE id = ?1", args: []any{5, 6},
			kind: Update, ids: []any{5}, rewrite: "UPDATE orders_7 SET amount = ?2 WHERE id = ?1"},
		{name: "update sets owner", query: `UPDATE "orders" SET "user_id" = $1, amount = amount + 1 WHERE "id" = $2 RETURNING "orders"."id"`,
			args: []any{9, 1}, kind: Update, ids: []any{1},
			assigned: []Assignment{{Column: "user_id", Value: Value{Value: 9, Arg: 0}}},
			rewrite:  `UPDATE "orders_7" SET "user_id" = $1, amount = amount + 1 WHERE "id" = $2 RETURNING "orders_7"."id"`},
		{name: "update sets id to an expression", query: "UPDATE orders SET id = id + 1 WHERE user_id = 3", kind: Update,
			owners: []any{int64(3)}, assigned: []Assignment{{Column: "id", Value: Value{Arg: -1}}},
			rewrite: "UPDATE orders_7 SET id = id + 1 WHERE user_id = 3"},
		{name: "mysql upsert values", query: "INSERT INTO `orders` (`id`,`user_id`) VALUES (?,?) ON DUPLICATE KEY UPDATE `user_id`=VALUES(`user_id`), `amount`=`orders`.`amount`+1",
			args: []any{1, 2}, kind: Insert, ids: []any{1}, owners: []any{2},
			rewrite: "INSERT INTO `orders_7` (`id`,`user_id`) VALUES (?,?) ON DUPLICATE KEY UPDATE `user_id`=VALUES(`user_id`), `amount`=`orders_7`.`amount`+1"},
		{name: "keywords as column names", query: "SELECT key, value FROM orders WHERE user = ? AND key IN (?, ?) ORDER BY value NULLS LAST FOR UPDATE",
			args: []any{1, 2, 3}, kind: Select,
			rewrite: "SELECT key, value FROM orders_7 WHERE user = ? AND key IN (?, ?) ORDER BY value NULLS LAST FOR UPDATE"},
		{name: "keywords as routing columns", query: "SELECT * FROM events WHERE created < CURRENT_TIMESTAMP AND user = ? AND key IN (?, ?)",
			args: []any{1, 2, 3}, kind: Select, ids: []any{2, 3}, owners: []any{1},
			rewrite: "SELECT * FROM orders_7 WHERE created < CURRENT_TIMESTAMP AND user = ? AND key IN (?, ?)"},
		{name: "column named like the table in an upsert", query: "INSERT INTO orders (id, orders) VALUES (1, 2) ON DUPLICATE KEY UPDATE orders = 3",
			kind: Insert, ids: []any{int64(1)},
			rewrite: "INSERT INTO orders_7 (id, orders) VALUES (1, 2) ON DUPLICATE KEY UPDATE orders = 3"},
		{name: "tables in text order", query: "SELECT * FROM users u, orders o WHERE EXISTS (SELECT 1 FROM carts c WHERE c.id = o.id) AND o.id = ?",
			args: []any{3}, kind: Select, ids: []any{3},
			rewrite: "SELECT * FROM users u, orders_7 o WHERE EXISTS (SELECT 1 FROM carts c WHERE c.id = o.id) AND o.id = ?"},
		{name: "non-integer literals", query: "SELECT * FROM orders WHERE id = 1.5 AND user_id IN (2e3, .5) AND amount > 1E-2", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE id = 1.5 AND user_id IN (2e3, .5) AND amount > 1E-2"},
		{name: "derived table joined", query: "SELECT * FROM (SELECT 1 AS id) AS x JOIN orders ON orders.id = x.id WHERE orders.user_id = ?",
			args: []any{5}, kind: Select, owners: []any{5},
			rewrite: "SELECT * FROM (SELECT 1 AS id) AS x JOIN orders_7 ON orders_7.id = x.id WHERE orders_7.user_id = ?"},
		{name: "unary not", query: "SELECT * FROM orders WHERE NOT user_id = ? AND id = ? AND NOT (id = ? OR ? = user_id) AND NOT 1 = user_id",
			args: []any{1, 2, 3, 4}, kind: Select, ids: []any{2},
			rewrite: "SELECT * FROM orders_7 WHERE NOT user_id = ? AND id = ? AND NOT (id = ? OR ? = user_id) AND NOT 1 = user_id"},
		{name: "binary nots", query: "SELECT * FROM orders WHERE user_id IS NOT NULL AND id NOT IN (1) AND NOT EXISTS (SELECT 1) AND user_id = 3 AND user_id NOT BETWEEN 1 AND 2",
			kind: Select, owners: []any{int64(3)},
			rewrite: "SELECT * FROM orders_7 WHERE user_id IS NOT NULL AND id NOT IN (1) AND NOT EXISTS (SELECT 1) AND user_id = 3 AND user_id NOT BETWEEN 1 AND 2"},
		// The parser alone reads the OR inside the IS NOT and NOT LIKE,
		// and routes by user_id = 3.
		{name: "or after is not", query: "SELECT * FROM orders WHERE user_id = 3 AND note IS NOT NULL OR id = 4", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE user_id = 3 AND note IS NOT NULL OR id = 4"},
		{name: "or after not like", query: "SELECT * FROM orders WHERE user_id = 3 AND note NOT LIKE 'a%' OR id = 4", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE user_id = 3 AND note NOT LIKE 'a%' OR id = 4"},
		{name: "and after is not and not like", query: "SELECT * FROM orders WHERE note IS NOT NULL AND note NOT LIKE ? AND user_id = 3",
			args: []any{"a%"}, kind: Select, owners: []any{int64(3)},
			rewrite: "SELECT * FROM orders_7 WHERE note IS NOT NULL AND note NOT LIKE ? AND user_id = 3"},
		{name: "mysql || is or", query: "SELECT * FROM `orders` WHERE `user_id` = 3 AND `a` || `b`", kind: Select,
			rewrite: "SELECT * FROM `orders_7` WHERE `user_id` = 3 AND `a` || `b`"},
		{name: "or inside case", query: "SELECT * FROM orders WHERE CASE WHEN a OR b THEN 1 END = 1 AND user_id = 3 ORDER BY a OR b",
			kind: Select, owners: []any{int64(3)},
			rewrite: "SELECT * FROM orders_7 WHERE CASE WHEN a OR b THEN 1 END = 1 AND user_id = 3 ORDER BY a OR b"},
		// The parser's BETWEEN takes every AND term after it into its
		// range: they bind nothing, which loses routing, never misroutes.
		{name: "terms after between", query: "SELECT * FROM orders WHERE id BETWEEN 1 AND 2 AND user_id = 3", kind: Select,
			rewrite: "SELECT * FROM orders_7 WHERE id BETWEEN 1 AND 2 AND user_id = 3"},
		{name: "delete alias", query: "DELETE FROM orders AS o WHERE o.id = ?", args: []any{1}, kind: Delete,
			ids: []any{1}, rewrite: "DELETE FROM orders_7 AS o WHERE o.id = ?"},
		{name: "delete returning", query: `DELETE FROM "orders" WHERE "user_id" = $1 RETURNING *`, args: []any{1}, kind: Delete,
			owners: []any{1}, rewrite: `DELETE FROM "orders_7" WHERE "user_id" = $1 RETURNING *`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Parse(c.query, c.args, testTables)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if st.Kind != c.kind || !st.Sharded() {
				t.Fatalf("kind %v sharded %v, want %v sharded", st.Kind, st.Sharded(), c.kind)
			}
			checkValues(t, c.query, "IDs", st.IDs, c.ids, c.args)
			checkValues(t, c.query, "Owners", st.Owners, c.owners, c.args)
			if !reflect.DeepEqual(st.Assigned, c.assigned) {
				t.Errorf("assigned %+v, want %+v", st.Assigned, c.assigned)
			}
			got, err := st.Rewrite("orders_7")
			if err != nil || got != c.rewrite {
				t.Errorf("rewrite\n got %q %v\nwant %q", got, err, c.rewrite)
			}
		})
	}
}

// TestPassThrough: statements naming no sharded table are neither parsed
// nor refused, and come back unchanged.
func TestPassThrough(t *testing.T) {
	for _, q := range []string{
		"SELECT * FROM users WHERE id = ?",
		"BEGIN",
		"SAVEPOINT sp1",
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = CURRENT_SCHEMA() AND table_name = $1",
		"CREATE TABLE `users` (`id` bigint)",
		"SELECT 1; SELECT 2",
		"SELECT * FROM users WHERE note = 'orders'",
		"SELECT * FROM users u JOIN (SELECT 1) AS orders_x ON 1=1",
		"WITH x AS (SELECT 1) SELECT * FROM x",
		"SELECT * FROM users WHERE note = 'unterminated",
		"SELECT (1 FROM users",
		"",
		"   ",
	} {
		st, err := Parse(q, nil, testTables)
		if err != nil {
			t.Errorf("%q: %v", q, err)
			continue
		}
		if st.Sharded() {
			t.Errorf("%q: sharded as %s", q, st.Table.Name)
		}
		if got, err := st.Rewrite("orders_7"); err != nil || got != q {
			t.Errorf("%q: rewrite %q %v", q, got, err)
		}
	}
}

// TestRefused: what cannot be routed is an error wrapping its sentinel and
// naming the table.
func TestRefused(t *testing.T) {
	cases := []struct {
		query string
		args  []any
		want  error
		table string
	}{
		{query: "SELECT * FROM orders JOIN items ON items.order_id = orders.id", want: ErrSeveralTables, table: "orders"},
		{query: "SELECT * FROM items, orders", want: ErrSeveralTables, table: "items"},
		{query: "SELECT * FROM orders a JOIN orders b ON a.id = b.id", want: ErrSeveralTables, table: "orders"},
		{query: "SELECT * FROM orders WHERE EXISTS (SELECT 1 FROM items WHERE items.order_id = orders.id)", want: ErrSeveralTables, table: "items"},
		{query: "SELECT id FROM orders UNION SELECT id FROM orders", want: ErrSeveralTables, table: "orders"},
		{query: "SELECT * FROM orders; DELETE FROM orders", want: ErrMultipleStatements, table: "orders"},
		{query: "SELECT * FROM users; DROP TABLE orders", want: ErrMultipleStatements, table: "orders"},
		{query: "CREATE TABLE `orders` (`id` bigint)", want: ErrDDL, table: "orders"},
		{query: `drop table "orders"`, want: ErrDDL, table: "orders"},
		{query: "ALTER TABLE orders ADD COLUMN x int", want: ErrDDL, table: "orders"},
		{query: "TRUNCATE orders", want: ErrDDL, table: "orders"},
		{query: "SELECT FROM WHERE orders", want: ErrSyntax, table: "orders"},
		{query: "DELETE orders WHERE id = 1", want: ErrSyntax, table: "orders"},
		{query: "SELECT * FROM orders WHERE id = 1::bigint", want: ErrSyntax, table: "orders"},
		{query: "SELECT * FROM orders WHERE note = 'unterminated", want: ErrSyntax, table: "statement"},
		{query: "SELECT * FROM orders WHERE (id = 1", want: ErrSyntax, table: "statement"},
		{query: `SELECT * FROM orders WHERE note = 'a\' OR id = 1 --'`, want: ErrUnsupported, table: "statement"},
		{query: "SELECT /*!50000 * FROM orders */", want: ErrUnsupported, table: "statement"},
		{query: "INSERT INTO orders (id) VALUES (5--1\n)", want: ErrUnsupported, table: "statement"},
		{query: `SELECT * FROM orders WHERE note = "a\" OR id = 1 --"`, want: ErrUnsupported, table: "statement"},
		{query: "SELECT * FROM orders WHERE id = ? AND user_id = $1", args: []any{1}, want: ErrUnsupported, table: "orders"},
		{query: "SELECT * FROM orders WHERE id = ?", want: ErrArgs, table: "orders"},
		{query: "SELECT * FROM orders WHERE id = $2", args: []any{1}, want: ErrArgs, table: "orders"},
		{query: "SELECT orders.id FROM users orders JOIN orders o ON 1 = 1", want: ErrUnsupported, table: "orders"},
		{query: "SELECT * FROM (orders)", want: ErrUnsupported, table: "orders"},
		{query: "SELECT * FROM orders WHERE größe = ?", args: []any{1}, want: ErrSyntax, table: "orders"},
	}
	for _, c := range cases {
		_, err := Parse(c.query, c.args, testTables)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: error %v, want %v", c.query, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.table) {
			t.Errorf("%q: error %q does not name %s", c.query, err, c.table)
		}
	}
}

func TestBadNames(t *testing.T) {
	for _, tables := range [][]Table{
		{{Name: "", ID: "id"}},
		{{Name: "orders", ID: ""}},
		{{Name: "orders`x", ID: "id"}},
		{{Name: "orders", ID: "id", Owner: "user id"}},
		{{Name: "orders", ID: "id"}, {Name: "Orders", ID: "id"}},
	} {
		if _, err := Parse("SELECT 1", nil, tables); !errors.Is(err, ErrName) {
			t.Errorf("%+v: %v, want ErrName", tables, err)
		}
	}
	st, err := Parse("SELECT * FROM orders", nil, testTables)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "orders`; DROP TABLE x; --", `o"7`, "orders 7", "ordérs"} {
		if _, err := st.Rewrite(bad); !errors.Is(err, ErrName) {
			t.Errorf("Rewrite(%q): %v, want ErrName", bad, err)
		}
	}
}
