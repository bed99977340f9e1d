package shardgorm_test

import (
	"context"
	"fmt"
	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"log"
	"os"
	"path/filepath"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/shardgorm"
)

type Lesson struct {
	ID   int64 `gorm:"primaryKey" idgen:"snowflake"`
	Name string
}

// A repository over two SQLite files standing for databases m0 and m1, with
// ShardingSphere's course rule.
func Example() {
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Machine ID 1; a store hands these out to several instances.
	reg, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(1), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	var dbs []*gorm.DB
	for _, name := range []string{"m0", "m1"} {
		db, err := gorm.Open(sqlite.Open(filepath.Join(dir, name+".db")), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			log.Fatal(err)
		}
		if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
			log.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	router, err := sharding.NewMod(sharding.Mod{ // db = id % 2, table = ((id+1) % 4)/2 + 1
		Databases: "m{0..1}", Tables: "lesson_{1..2}",
		TableRule: "(id+1)%4/2+1",
	})
	if err != nil {
		log.Fatal(err)
	}
	repo, err := shardgorm.New(dbs, router)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := repo.Migrate(ctx, &Lesson{}); err != nil { // lesson_1 and lesson_2 in m0 and m1
		log.Fatal(err)
	}

	lessons := make([]Lesson, 8)
	for i := range lessons {
		lessons[i].Name = fmt.Sprint("java ", i)
	}
	if err := repo.Create(ctx, lessons); err != nil { // IDs filled, rows split by shard
		log.Fatal(err)
	}

	var l Lesson
	if err := repo.Find(ctx, lessons[5].ID, &l); err != nil { // reads one shard
		log.Fatal(err)
	}
	fmt.Println(l.Name)

	err = repo.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
		var n int64
		err := db.Count(&n).Error
		fmt.Println(s, n)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// java 5
	// m0.lesson_1 2
	// m0.lesson_2 2
	// m1.lesson_1 2
	// m1.lesson_2 2
}
