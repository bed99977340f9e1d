package shardgorm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

const (
	// guardName is the callback that checks a bound statement's shard.
	guardName = "idforge:shard_guard"
	// fillName is the idforge plugin's create callback, which fills the
	// IDs the guard routes by.
	fillName = "idforge:fill_ids"
	// bindingKey holds a statement's *binding in its Settings, which GORM
	// copies into every statement and transaction chained from it.
	bindingKey = "idforge:shard"
)

// binding is the shard a session of DB or ForEach is bound to.
type binding struct {
	g     *Repository
	shard sharding.Shard
	pool  any // Callback() of the shard's database
}

// bind selects s's table on db and binds the statement to s.
func (g *Repository) bind(db *gorm.DB, s sharding.Shard) *gorm.DB {
	return db.Table(s.TableName).Set(bindingKey, &binding{g: g, shard: s, pool: g.base.DBs[s.Database].Callback()})
}

// registerGuard registers the guard on db's create, update and delete,
// once per callbacks: every session and transaction of db shares them, and
// repositories sharing db share the guard, which reads its shard from the
// statement.
func registerGuard(db *gorm.DB) error {
	cb := db.Callback()
	if cb.Create().Get(guardName) != nil {
		return nil
	}
	return errors.Join(
		cb.Create().After(fillName).Before("gorm:before_create").Register(guardName, func(db *gorm.DB) { guard(db, true) }),
		cb.Update().Before("gorm:update").Register(guardName, func(db *gorm.DB) { guard(db, false) }),
		cb.Delete().Before("gorm:delete").Register(guardName, func(db *gorm.DB) { guard(db, false) }),
	)
}

// guard fails a bound statement that would write outside its shard: on
// another database or table, or, for a create, with a row routing
// elsewhere.
func guard(db *gorm.DB, create bool) {
	v, ok := db.Statement.Settings.Load(bindingKey)
	if !ok || db.Error != nil {
		return
	}
	b := v.(*binding)
	if err := b.check(db, create); err != nil {
		_ = db.AddError(err)
	}
}

func (b *binding) check(db *gorm.DB, create bool) error {
	if db.Callback() != b.pool {
		return fmt.Errorf("%w: a statement bound to %s runs on another database", sharding.ErrWrongShard, b.shard)
	}
	// Table("schema.table") keeps the table part in Statement.Table.
	want := b.shard.TableName[strings.LastIndex(b.shard.TableName, ".")+1:]
	if db.Statement.Table != want {
		return fmt.Errorf("%w: a statement bound to %s writes table %q", sharding.ErrWrongShard, b.shard, db.Statement.Table)
	}
	if !create {
		return nil
	}
	if db.Statement.Schema == nil {
		return fmt.Errorf("%w: a create bound to %s has no model to route its rows by", sharding.ErrWrongShard, b.shard)
	}
	key, err := b.g.keyField(db.Statement.Schema)
	if err != nil {
		return err
	}
	rv := reflect.Indirect(db.Statement.ReflectValue)
	rows := []reflect.Value{rv}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		rows = rows[:0]
		for i := range rv.Len() {
			rows = append(rows, reflect.Indirect(rv.Index(i)))
		}
	case reflect.Struct:
	default:
		return fmt.Errorf("%w: a create bound to %s of a %s: create structs, whose shard keys can be routed", sharding.ErrWrongShard, b.shard, rv.Kind())
	}
	for i, row := range rows {
		id, err := repo.KeyValue(key.ReflectValueOf(db.Statement.Context, row))
		if err != nil {
			return err
		}
		_, s, err := b.g.base.Route(id)
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		if err := repo.Within(&b.shard, s, fmt.Sprintf("row %d with key", i), id); err != nil {
			return err
		}
	}
	return nil
}
