package shardgorm_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/shardgorm"
)

// Purchase is an order of a user, sharded by the user.
type Purchase struct {
	ID        int64 `gorm:"primaryKey" idgen:"snowflake"`
	UserID    int64 `gorm:"index"`
	ProductID int64
	Amount    int64
}

// The plugin shards the purchases over two SQLite files standing for
// databases m0 and m1, two tables each; the GORM code is the one written
// for one database.
func ExamplePlugin() {
	dir, err := os.MkdirTemp("", "purchases")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	// Owner-keyed IDs need room below the value drawn: snowflake.JSSafe.
	reg, err := idforge.New(ctx, idforge.Settings{Layout: snowflake.JSSafe, Machine: machine.Manual(1), StateDir: "off"})
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
	router, err := sharding.NewMod(sharding.Mod{Databases: "m{0..1}", Tables: "purchases_{0..1}"})
	if err != nil {
		log.Fatal(err)
	}
	plugin, err := shardgorm.NewPlugin(dbs, router, shardgorm.PluginSettings{
		Settings: sharding.Settings{ShardKey: "UserID", OwnerResidues: 4}, // IDs route like their user
	}, &Purchase{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plugin.Migrate(ctx); err != nil { // purchases_0 and purchases_1 in m0 and m1
		log.Fatal(err)
	}
	db := dbs[0] // the application's *gorm.DB
	if err := db.Use(plugin); err != nil {
		log.Fatal(err)
	}

	// From here on, plain GORM.
	var ps []Purchase
	for u := int64(1); u <= 4; u++ {
		ps = append(ps, Purchase{UserID: u, ProductID: 7, Amount: 10 * u}, Purchase{UserID: u, ProductID: 8, Amount: 1})
	}
	if err := db.Create(&ps).Error; err != nil {
		log.Fatal(err)
	}
	var p Purchase
	if err := db.First(&p, ps[5].ID).Error; err != nil { // one shard, by ID
		log.Fatal(err)
	}
	fmt.Println("first:", p.UserID, p.ProductID)
	var mine []Purchase
	if err := db.Where("user_id = ?", 3).Find(&mine).Error; err != nil { // one shard, by user
		log.Fatal(err)
	}
	fmt.Println("user 3:", len(mine))
	var page []Purchase
	if err := db.Order("amount desc").Limit(3).Find(&page).Error; err != nil { // every shard, merged
		log.Fatal(err)
	}
	fmt.Println("top:", page[0].Amount, page[1].Amount, page[2].Amount)
	if err := db.Model(&ps[0]).Update("amount", 11).Error; err != nil {
		log.Fatal(err)
	}
	err = db.Model(&ps[0]).Update("user_id", 2).Error // user 2 lives in another shard
	fmt.Println("moved:", errors.Is(err, sharding.ErrWrongShard))
	var n int64
	if err := db.Model(&Purchase{}).Where("amount > ?", 5).Count(&n).Error; err != nil {
		log.Fatal(err)
	}
	fmt.Println("count:", n)
	err = db.Where("product_id = ?", 8).Delete(&Purchase{}).Error
	fmt.Println("unrouted delete:", errors.Is(err, shardgorm.ErrUnrouted))
	// Output:
	// first: 3 8
	// user 3: 2
	// top: 40 30 20
	// moved: true
	// count: 4
	// unrouted delete: true
}
