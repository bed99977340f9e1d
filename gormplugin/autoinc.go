package idplugin

import (
	"context"
	"database/sql"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// autoKey is one column of one table of one database, warned about once.
type autoKey struct {
	db            any // the *sql.DB under the *gorm.DB, when GORM can tell
	table, column string
}

// warnAutoIncrement says, once per column and through GORM's logger, when
// a key the plugin fills is a column the database numbers itself
// (AUTO_INCREMENT, an identity or a nextval default, AUTOINCREMENT): what
// db.AutoMigrate creates when [Prepare] was not called before it. GORM's
// migrator offers no hook to learn the column type from the plugin, so the
// plugin can only say so. Inserts still work — the row gets the plugin's
// ID and the database's counter goes unused — so a table kept
// auto-incrementing on purpose (one migrated from AUTO_INCREMENT keys)
// keeps working. fields are the keys whose auto-increment GORM implied
// and the plugin turned off.
func (p *plugin) warnAutoIncrement(ctx context.Context, db *gorm.DB, s *schema.Schema, fields []*schema.Field) {
	if len(fields) == 0 || db.DryRun || db.Statement == nil || s.Table == "" {
		return
	}
	var root any
	if sqlDB, err := db.DB(); err == nil {
		root = sqlDB
	}
	var check []*schema.Field
	for _, sf := range fields {
		if sf.DBName == "" {
			continue
		}
		if _, seen := p.autoWarned.LoadOrStore(autoKey{root, s.Table, sf.DBName}, true); !seen {
			check = append(check, sf)
		}
	}
	if len(check) == 0 {
		return
	}
	log := p.logger(db)
	// On a session of the plugin's own (see inspect), with a read of the
	// catalogue that cannot fail on a missing table.
	p.inspect(ctx, db, func(pool *gorm.DB) {
		for _, sf := range check {
			if !autoIncrementColumn(pool, s.Table, sf.DBName) {
				continue
			}
			log.Warn(ctx, "idforge: model %s: column %s.%s numbers rows itself (AUTO_INCREMENT, IDENTITY, a sequence default or AUTOINCREMENT: "+
				"what db.AutoMigrate creates without idplugin.Prepare), but the plugin fills it: the database's counter goes unused. "+
				"Call idplugin.Prepare(db, &%s{}) before db.AutoMigrate so that new tables get a plain BIGINT key; "+
				"a table kept auto-incrementing on purpose works as it is",
				s.Name, s.Table, sf.DBName, s.Name)
		}
	})
}

// autoIncrementColumn reports whether column of table numbers rows itself,
// false when it cannot tell (no such table yet, a dialect it does not
// know), reading on db's statement's connection.
func autoIncrementColumn(db *gorm.DB, table, column string) bool {
	schemaName, name, dotted := strings.Cut(table, ".")
	if !dotted {
		schemaName, name = "", table
	}
	var q string
	var args []any
	switch db.Dialector.Name() {
	case "mysql":
		q = "SELECT EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?"
		args = []any{schemaName, name, column}
	case "postgres":
		q = "SELECT COALESCE(column_default, '') || ' ' || is_identity FROM information_schema.columns " +
			"WHERE table_schema = COALESCE(NULLIF($1::text, ''), current_schema()) AND table_name = $2 AND column_name = $3"
		args = []any{schemaName, name, column}
	case "sqlite":
		if dotted {
			return false
		}
		q = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
		args = []any{name}
	default:
		return false
	}
	var def sql.NullString
	rows, err := db.Statement.ConnPool.QueryContext(db.Statement.Context, q, args...)
	if err != nil {
		return false
	}
	defer rows.Close()
	if !rows.Next() || rows.Scan(&def) != nil {
		return false
	}
	d := strings.ToLower(def.String)
	switch db.Dialector.Name() {
	case "mysql":
		return strings.Contains(d, "auto_increment")
	case "postgres":
		return strings.HasPrefix(d, "nextval(") || strings.HasSuffix(d, " yes")
	default:
		return sqliteAutoIncrement(d, column)
	}
}

// sqliteAutoIncrement reports whether the CREATE TABLE statement ddl
// (lower case) declares column INTEGER PRIMARY KEY AUTOINCREMENT, the only
// column SQLite lets say so.
func sqliteAutoIncrement(ddl, column string) bool {
	i := strings.Index(ddl, "autoincrement")
	if i < 0 {
		return false
	}
	// The column definition the keyword ends: from the last comma or
	// opening parenthesis before it.
	start := strings.LastIndexAny(ddl[:i], ",(") + 1
	def := strings.TrimSpace(ddl[start:i])
	name, _, _ := strings.Cut(def, " ")
	return strings.Trim(name, "`\"[]") == strings.ToLower(column)
}
