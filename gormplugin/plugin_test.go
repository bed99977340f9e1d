package idplugin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/tests/testdb"
)

func TestFill(t *testing.T) {
	d := testdb.SQLite(t)
	db := open(t, d)
	if err := db.AutoMigrate(&I64Row{}, &Parent{}, &Child{}, &Owner{}, &Profile{}, &Tag{}); err != nil {
		t.Fatal(err)
	}
	one := I64Row{Name: "one"}
	many := []*I64Row{{Name: "a"}, {ID: 5, Name: "pinned"}}
	if err := idplugin.Fill(db, &one); err != nil || one.ID == 0 {
		t.Fatalf("Fill(&row): %+v, %v", one, err)
	}
	if err := idplugin.Fill(db, many); err != nil || many[0].ID == 0 || many[0].ID == one.ID || many[1].ID != 5 {
		t.Fatalf("Fill([]*row): %+v %+v, %v", many[0], many[1], err)
	}
	m := map[string]any{"name": "m"}
	if err := idplugin.Fill(db.Model(&I64Row{}), m); err != nil || m["id"] == nil {
		t.Fatalf("Fill(map): %v, %v", m, err)
	}
	p := Parent{Children: []Child{{Name: "c"}}}
	if err := idplugin.Fill(db, &p); err != nil || p.ID == 0 || p.Children[0].ID != 0 {
		t.Fatalf("Fill(&parent) = %v: parent %d, child %d (children are left to Create)", err, p.ID, p.Children[0].ID)
	}
	var n int64
	if err := db.Model(&I64Row{}).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("Fill inserted %d rows (%v)", n, err)
	}
	// Create keeps what Fill drew.
	id := one.ID
	if err := db.Create(&one).Error; err != nil || one.ID != id {
		t.Fatalf("Create after Fill: id %d -> %d, %v", id, one.ID, err)
	}

	for _, bad := range []any{I64Row{}, (*I64Row)(nil), 42} {
		if err := idplugin.Fill(db, bad); err == nil {
			t.Errorf("Fill(%#v) succeeded", bad)
		}
	}
	bare, err := gorm.Open(sqlite.Open(d.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := idplugin.Fill(bare, &I64Row{}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("Fill without the plugin: %v", err)
	}
	if err := idplugin.Prepare(bare, &I64Row{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("Prepare without the plugin: %v", err)
	}
}

type ctxKey struct{}

func TestGeneratorGetsStatementContextAndErrors(t *testing.T) {
	d := testdb.SQLite(t)
	var (
		mu   sync.Mutex
		seen []any
		fail error
	)
	reg := genreg.New()
	var n int64
	if err := reg.Register("snowflake", "", testreg.Func(func(ctx context.Context) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ctx.Value(ctxKey{}))
		n++
		return n, fail
	})); err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(sqlite.Open(d.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(&I64Row{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
	if err := db.WithContext(ctx).Create(&[]I64Row{{}, {}}).Error; err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "mine" || seen[1] != "mine" {
		t.Fatalf("generator saw contexts %v", seen)
	}
	fail = fmt.Errorf("%w: test", engine.ErrStoreUnavailable)
	err = db.Create(&I64Row{Name: "x"}).Error
	if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "model I64Row field ID") {
		t.Fatalf("generator error: %v", err)
	}
	var count int64
	if err := db.Model(&I64Row{}).Count(&count).Error; err != nil || count != 2 {
		t.Fatalf("%d rows after a failed draw, want 2 (%v)", count, err)
	}
}

type recordingLogger struct {
	logger.Interface
	mu   sync.Mutex
	info []string
}

func (l *recordingLogger) Info(_ context.Context, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, fmt.Sprintf(format, args...))
}

func TestOptions(t *testing.T) {
	d := testdb.SQLite(t)
	log := &recordingLogger{Interface: logger.Discard}
	db, err := gorm.Open(sqlite.Open(d.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: newRegistry(t), Logger: log, UntaggedPrimaryKeys: true})); err != nil {
		t.Fatal(err)
	}
	if err := idplugin.Prepare(db, &I64Row{}, &Plain{}, &Child{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"idforge: model I64Row: ID <- snowflake (auto-increment off)",
		"idforge: model Plain: ID <- snowflake (auto-increment off)",
		"idforge: model Child: ID <- chain,name=child (auto-increment off)",
	}
	if strings.Join(log.info, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged %q, want %q", log.info, want)
	}

	db, err = gorm.Open(sqlite.Open(d.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: newRegistry(t), DefaultGenerator: ",name=x"})); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("db.Use with a default generator without kind: %v", err)
	}
}

// TestDefaultRegistry is the only test here that uses idforge.Default(),
// which reads IDFORGE_MACHINE_ID once per process.
func TestDefaultRegistry(t *testing.T) {
	t.Setenv("IDFORGE_MACHINE_ID", "5")
	// No state file, so no lock file: the test binaries of other packages
	// run at once on this machine ID too, and the registry outlives the test.
	t.Setenv("IDFORGE_STATE_DIR", "off")
	db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New()); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(&I64Row{}); err != nil {
		t.Fatal(err)
	}
	r := I64Row{Name: "default"}
	if err := db.Create(&r).Error; err != nil {
		t.Fatal(err)
	}
	_, machine, _, err := snowflake.Default.Decode(r.ID)
	if err != nil || machine != 5 {
		t.Fatalf("id %d from the default registry: machine %d, %v", r.ID, machine, err)
	}
	if err := db.Create(&Child{}).Error; !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), `kind "chain" needs a registry built with a store`) {
		t.Fatalf("kind chain is not in the default registry, yet: %v", err)
	}
}

// TestTypedNilRegistryRefused: a nil *genreg.Registry is a registry that
// was never built, not a request for the default one, which would issue
// IDs on machine 0 beside every other instance.
func TestTypedNilRegistryRefused(t *testing.T) {
	db, err := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var reg *genreg.Registry
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Settings.Registry") {
		t.Fatalf("Use with a nil *genreg.Registry: %v; want ErrInvalidConfig naming Settings.Registry", err)
	}
}

// A DefaultGenerator the plugin cannot give to untagged integer keys (a
// format, a UUID kind) is refused when the plugin is initialised, naming
// the field and the value: such keys used to be left to the database's
// auto-increment without a word.
func TestDefaultGeneratorForIntegersOnly(t *testing.T) {
	for _, def := range []string{"snowflake,format=hex", "snowflake,format=radix62", "chain,name=order,format=radix36", "uuidv7", "chain,name=invoice,format=INV{yyyy}{seq:6}"} {
		db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Use(idplugin.New(idplugin.Settings{Registry: newRegistry(t), DefaultGenerator: def}))
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "idplugin.Settings.DefaultGenerator") || !strings.Contains(err.Error(), def) {
			t.Errorf("DefaultGenerator %q: %v; want ErrInvalidConfig naming the field and the value", def, err)
		}
	}
	db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: newRegistry(t), DefaultGenerator: "chain,name=order"})); err != nil {
		t.Errorf("DefaultGenerator \"chain,name=order\": %v", err)
	}
}
