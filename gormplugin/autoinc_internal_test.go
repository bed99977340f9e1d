package idplugin

import "testing"

func TestSQLiteAutoIncrement(t *testing.T) {
	cases := []struct {
		ddl, column string
		want        bool
	}{
		{"create table `orders` (`id` integer primary key autoincrement,`name` text)", "id", true},
		{`create table "orders" ("id" integer primary key autoincrement, "name" text)`, "ID", true},
		{"create table orders (id integer, name text, primary key (id))", "id", false},
		{"create table orders (seq integer primary key autoincrement, id integer)", "id", false},
		{"create table orders (id integer primary key, note text default 'autoincrement')", "id", false},
	}
	for _, c := range cases {
		if got := sqliteAutoIncrement(c.ddl, c.column); got != c.want {
			t.Errorf("%s, column %s: %v; want %v", c.ddl, c.column, got, c.want)
		}
	}
}
