package idplugin

import (
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/idforge/idforge/engine"
)

// includeKeys makes the INSERT carry every column the plugin fills, whatever
// stmt.Selects and stmt.Omits say: db.Select("Name").Create(&row) or
// db.Omit("ID").Create(&row) would otherwise insert the row without the ID
// the struct now holds (MariaDB and PostgreSQL refuse it, SQLite stores a
// rowid of its own, and children created in the same call point to a parent
// that is not there). It leaves every other column as the caller chose.
func (mp *modelPlan) includeKeys(stmt *gorm.Statement) error {
	if len(stmt.Selects) == 0 && len(stmt.Omits) == 0 {
		return nil // the common case: nothing restricts the columns
	}
	missing := mp.excluded(stmt)
	if len(missing) == 0 {
		return nil
	}
	// Drop the omits that name a key, expanding "*" into the other columns;
	// new slices, as the old ones may be the caller's.
	var omits []string
	for _, o := range stmt.Omits {
		scratch := gorm.Statement{Schema: stmt.Schema, Table: stmt.Table, Omits: []string{o}}
		res, _ := scratch.SelectAndOmitColumns(false, false)
		hits := false
		for _, db := range missing {
			if v, ok := res[db]; ok && !v {
				hits = true
			}
		}
		if !hits {
			omits = append(omits, o)
			continue
		}
		for _, db := range stmt.Schema.DBNames {
			if v, ok := res[db]; ok && !v && !slices.Contains(missing, db) {
				omits = append(omits, db)
			}
		}
	}
	stmt.Omits = omits
	if _, restricted := stmt.SelectAndOmitColumns(true, false); restricted {
		stmt.Selects = append(slices.Clip(stmt.Selects), missing...)
	}
	if still := mp.excluded(stmt); len(still) > 0 {
		return fmt.Errorf("%w: model %s: Select/Omit leave out %v, which the plugin fills: the row would not get the ID the struct holds",
			engine.ErrInvalidConfig, mp.schema.Name, still)
	}
	return nil
}

// excluded lists the columns the plugin fills that stmt would leave out of
// its INSERT, as GORM decides in ConvertToCreateValues.
func (mp *modelPlan) excluded(stmt *gorm.Statement) []string {
	res, restricted := stmt.SelectAndOmitColumns(true, false)
	var out []string
	for _, sf := range mp.fields {
		if sf.DBName == "" {
			continue
		}
		if v, ok := res[sf.DBName]; (ok && !v) || (!ok && restricted) {
			out = append(out, sf.DBName)
		}
	}
	return out
}
