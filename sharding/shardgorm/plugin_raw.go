package shardgorm

import (
	"regexp"

	"gorm.io/gorm"
)

// raw refuses a raw statement (Exec, Raw) naming a sharded model's logical
// table, which exists in no database.
func (p *Plugin) raw(db *gorm.DB) {
	if db.Error != nil {
		return
	}
	sql := db.Statement.SQL.String()
	for table, m := range p.byTable {
		if regexp.MustCompile(`(?i)[\s,(` + "`" + `"]` + regexp.QuoteMeta(table) + `[\s,)` + "`" + `"]|` + regexp.QuoteMeta(table) + `$`).MatchString(sql) {
			_ = db.AddError(m.unrouted("Exec or Raw"))
			return
		}
	}
}
