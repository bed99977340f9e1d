package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
)

func TestParseDialect(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Dialect
	}{
		{"mysql", MySQL}, {"MariaDB", MySQL}, {"postgres", Postgres}, {"postgresql", Postgres},
		{"pgx", Postgres}, {"sqlite", SQLite}, {" SQLite3 ", SQLite},
	} {
		got, err := ParseDialect(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseDialect(got.String()); err != nil || back != got {
			t.Errorf("ParseDialect(%v.String()) = %v, %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "oracle", "sqlserver", "my sql"} {
		if _, err := ParseDialect(bad); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "mariadb") {
			t.Errorf("ParseDialect(%q) error = %v; want ErrInvalidConfig listing the names", bad, err)
		}
	}
	if s := Dialect(0).String(); s != "Dialect(0)" {
		t.Errorf("Dialect(0).String() = %q", s)
	}
}

// TestDDLRefuses: a bad dialect or prefix is refused (the tables each
// dialect creates are checked where they are run, in engine/internal/sqlschema).
func TestDDLRefuses(t *testing.T) {
	if _, err := DDL(0, ""); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("DDL(0) err = %v; want ErrInvalidConfig", err)
	}
	for _, bad := range []string{"1x_", "a-b", "a b", "x;drop table y;", "schema.t_", "é_", strings.Repeat("a", 41)} {
		if _, err := DDL(MySQL, bad); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("DDL(mysql, %q) err = %v; want ErrInvalidConfig", bad, err)
		}
	}
}
