package idplugin

import (
	"context"
	"database/sql/driver"
	"reflect"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/internal/idgen"
)

// setColumnTypes gives the columns of UUID and dated fields the plugin
// fills their SQL types when set (from Prepare, for AutoMigrate): a UUID is
// a native uuid on PostgreSQL, BINARY(16) (uuid.UUID) or CHAR(36) (string)
// on MySQL/MariaDB and TEXT on SQLite, where uuid.UUID writes and compares
// as its string; so are the foreign keys in other models that reference a
// UUID key. A dated string is as long as its format. A type given in the
// gorm tag is kept. It reports which fields take their UUID as 16 bytes: a
// uuid.UUID in a BINARY column on MySQL/MariaDB, whether set here or in the
// gorm tag.
func (p *plugin) setColumnTypes(db *gorm.DB, s *schema.Schema, fields []*schema.Field, ids []*idgen.Field, set bool) []bool {
	dialect := db.Dialector.Name()
	binary := make([]bool, len(fields))
	for i, sf := range fields {
		switch {
		case sf.DBName == "":
		case ids[i].Spec.Kind == idgen.KindUUIDv7:
			binary[i] = p.uuidColumn(dialect, sf, set)
			for _, rel := range s.Relationships.Relations {
				for _, ref := range rel.References {
					if ref.PrimaryKey == sf && ref.ForeignKey != nil && ref.ForeignKey != sf {
						p.uuidColumn(dialect, ref.ForeignKey, set)
					}
				}
			}
		case set && ids[i].DatedLen() > 0 && sf.Size == 0 && !hasType(sf):
			sf.Size = ids[i].DatedLen()
		}
	}
	return binary
}

func hasType(sf *schema.Field) bool {
	_, ok := sf.TagSettings["TYPE"]
	return ok
}

// uuidColumn sets the SQL type of sf, a UUID column, when set, and on
// MySQL/MariaDB makes a binary column of a 16-byte array type take the 16
// bytes, which it reports.
func (p *plugin) uuidColumn(dialect string, sf *schema.Field, set bool) bool {
	t := sf.FieldType
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	array := t.Kind() == reflect.Array && t.Len() == 16 && t.Elem().Kind() == reflect.Uint8
	if !array && t.Kind() != reflect.String {
		return false // a foreign key of another type: the database will say
	}
	if set && !hasType(sf) {
		switch {
		case dialect == "postgres":
			sf.DataType = "uuid"
		case dialect == "mysql" && array:
			sf.DataType = "BINARY(16)"
		case dialect == "mysql":
			sf.DataType = "CHAR(36)"
		case dialect == "sqlite":
			sf.DataType = "TEXT"
		}
	}
	if dialect != "mysql" || !array || !strings.HasPrefix(strings.ToLower(string(sf.DataType)), "binary") {
		return false
	}
	if _, done := p.binary.LoadOrStore(sf, true); done {
		return true
	}
	// uuid.UUID's driver.Valuer writes the 36-character string, which a
	// BINARY(16) column refuses: GORM sends what ValueOf returns.
	valueOf := sf.ValueOf
	sf.ValueOf = func(ctx context.Context, v reflect.Value) (any, bool) {
		x, zero := valueOf(ctx, v)
		return toBinary(x), zero
	}
	return true
}

// toBinary returns a UUID (a 16-byte array, or a pointer to one) as a
// binaryUUID, anything else as it is.
func toBinary(x any) any {
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return x
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Array || rv.Len() != 16 || rv.Type().Elem().Kind() != reflect.Uint8 {
		return x
	}
	var b binaryUUID
	reflect.Copy(reflect.ValueOf(&b).Elem(), rv)
	return b
}

// binaryUUID is a UUID that a BINARY(16) column takes: its 16 bytes. It is
// an array, so that the upsert code can compare and hash it as a key.
type binaryUUID [16]byte

// Value implements driver.Valuer.
func (b binaryUUID) Value() (driver.Value, error) { return b[:], nil }

// String is the canonical form, for logs.
func (b binaryUUID) String() string { return uuid.UUID(b).String() }
