package schema

import (
	"embed"
	"fmt"
	"strings"

	"github.com/idforge/idforge/engine"
)

// The DDL of each dialect, commented, with the default table prefix.
//
//go:embed ddl/mysql.sql ddl/postgres.sql ddl/sqlite.sql
var ddlFiles embed.FS

// defaultTablePrefix starts the table names unless a prefix is given:
// idforge_segment, idforge_machine, idforge_meta.
const defaultTablePrefix = "idforge_"

// maxPrefix keeps the longest name (prefix + "machine_instance") within
// PostgreSQL's 63-byte identifiers.
const maxPrefix = 40

// tables names the store's tables: a prefix followed by "segment",
// "machine" and "meta". The zero value has the default prefix.
type tables struct{ prefix string }

// newTables returns the tables named with prefix ("" for
// "idforge_"): a plain identifier (letters, digits and '_', not
// starting with a digit) of at most 40 bytes, since it is written into SQL
// unquoted; anything else is an error wrapping engine.ErrInvalidConfig.
func newTables(prefix string) (tables, error) {
	if prefix == "" {
		return tables{defaultTablePrefix}, nil
	}
	if len(prefix) > maxPrefix {
		return tables{}, fmt.Errorf("%w: schema: table prefix %q: want at most %d bytes", engine.ErrInvalidConfig, prefix, maxPrefix)
	}
	for i, r := range prefix {
		ok := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9'
		if !ok {
			return tables{}, fmt.Errorf("%w: schema: table prefix %q: only letters, digits and '_', not starting with a digit",
				engine.ErrInvalidConfig, prefix)
		}
	}
	return tables{prefix}, nil
}

// prefixOr returns the prefix of the table names, the default for none.
func (t tables) prefixOr() string { return t.orDefault().prefix }

func (t tables) orDefault() tables {
	if t.prefix == "" {
		return tables{defaultTablePrefix}
	}
	return t
}

// DDL returns the commented CREATE TABLE statements of the store's tables
// for d, with tablePrefix ("" for "idforge_") starting their
// names; `idforge schema` prints it. A prefix must be a plain identifier
// (letters, digits and '_', not starting with a digit) of at most 40 bytes,
// since it is written into SQL unquoted; a bad prefix or dialect is an error
// wrapping engine.ErrInvalidConfig.
func DDL(d Dialect, tablePrefix string) (string, error) {
	t, err := newTables(tablePrefix)
	if err != nil {
		return "", err
	}
	return t.ddl(d)
}

func (t tables) ddl(d Dialect) (string, error) {
	if !d.valid() {
		return "", fmt.Errorf("%w %v", errUnknownDialect, d)
	}
	b, err := ddlFiles.ReadFile("ddl/" + d.String() + ".sql")
	if err != nil {
		return "", fmt.Errorf("schema: %w", err) // every valid dialect is embedded; TestDDL covers them
	}
	return strings.ReplaceAll(string(b), defaultTablePrefix, t.prefixOr()), nil
}
