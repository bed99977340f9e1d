// Package idplugin is the idforge plugin for GORM: it gives rows their IDs
// before they are inserted, from struct tags, with no round trip and no
// auto-increment, the same way on SQLite, MySQL/MariaDB and PostgreSQL.
// Its folder is gormplugin and its name idplugin, so that one import makes
// db.Use(idplugin.New()) read as written.
//
// It imports GORM, the root package idforge, the engine and the shared
// internals (tag parsing, row walking), never the other integrations.
//
//	import "github.com/idforge/idforge/gormplugin"
//
//	type Order struct {
//		ID    int64  `idgen:"snowflake"`
//		Code  string `idgen:"chain,name=order,format=radix62"`
//		Items []Item
//	}
//
//	db.Use(idplugin.New(idplugin.Settings{Registry: reg}))
//	db.Create(&order) // order.ID and order.Code are set, and so are the items' tagged IDs
//
// Without Settings.Registry the plugin draws from idforge.Default(): kind
// "snowflake" on the machine ID of machine.Default(), which is safe for one
// instance only unless IDFORGE_MACHINE_ID is set per instance. Services with
// replicas pass a registry from idforge.New with a shared store.
//
// The tag syntax is `idgen:"<kind>[,name=<name>][,format=<format>]"`; kind and
// name pick a generator from the registry, format (decimal, radix62,
// radix36) applies to string fields; the radix forms are zero-padded to full
// width (11 and 13 characters) so string keys sort like the IDs. Tagged fields
// may be int64, uint64, int, engine.ID, string, or pointers to them.
//
// # UUIDs and dated numbers
//
// Kind "uuidv7" fills uuid.UUID (github.com/google/uuid) and string fields
// with time-ordered version 7 UUIDs, strings in the canonical 36-character
// form:
//
//	ID uuid.UUID `idgen:"uuidv7"`
//
// [Prepare] gives their columns a native uuid type on PostgreSQL,
// BINARY(16) (uuid.UUID; CHAR(36) for a string) on MariaDB/MySQL and TEXT
// on SQLite, and the same to foreign keys that reference them. On
// MariaDB/MySQL the plugin writes the 16 bytes, and so do GORM's own
// lookups by the struct (First(&o, Order{ID: id}), Save, Delete, the
// associations); a hand-written condition compares with the bytes:
// Where("id = ?", id[:]).
//
// A chain with a format in braces fills a string with a dated number whose
// counter restarts at 1 every day, month or year (idforge.Registry.Dated
// has the grammar, the time zone and why such numbers have gaps):
//
//	Number string `idgen:"chain,name=invoice,format=INV-{yyyy}{MM}{dd}-{seq:6}"`
//
// It needs a registry from idforge.New with a store; [Prepare] sizes the
// column to the format, and the plugin gives the registry the Floor of
// every period (the largest counter of that period in the column).
//
// # What gets an ID
//
// Every create: Create of a struct, a pointer, a slice or array of structs or
// of pointers, CreateInBatches, Save of a new row, upserts with
// clause.OnConflict, and the rows GORM creates with the parent (belongs-to,
// has-one, has-many, many-to-many and join rows whose model has a tagged
// field). Only zero values are filled — 0, "", a nil pointer — so a set ID is
// kept and imports and tests can pin IDs.
//
// A column the plugin fills is always inserted: db.Select("Name").Create(&r)
// and db.Omit("ID").Create(&r) still insert the ID the struct now holds, so
// the row, and children created in the same call, agree with the struct.
// Other columns follow Select and Omit as GORM decides.
//
// DryRun sessions and db.ToSQL run the create callbacks too, so they draw
// real IDs: a snowflake ID is simply not used, a chain ID leaves a gap.
//
// # Hooks
//
// The plugin runs before GORM's BeforeCreate hooks, so hooks see the IDs. A
// copy of the row (c := *row) keeps them, as any set ID is kept: to create a
// copy from a hook, set its ID to zero first so that it gets its own. A
// create from a hook (on the *gorm.DB the hook receives) that would insert a
// copy with the same key into the same table fails, before the copy is sent,
// with an error wrapping [ErrHookCopy] (and gorm.ErrDuplicatedKey) that names
// the model and the field, and the create rolls back; rows keyed by the same
// ID in other tables, such as audit rows, are fine. Example_hooks shows both.
//
// Create with a map needs a model (db.Model(&Order{}).Create(m)): a tagged
// column the map names with a zero value is filled, and one the map leaves out
// is added to it under its column name, as GORM itself writes auto-increment
// IDs back into maps. A map created through db.Table with no model is left
// alone: GORM has no schema to read tags from.
//
// # Floors
//
// A store found without an epoch may have been wiped after handing out IDs,
// so it starts a chain it does not know only above a Floor (see
// engine.Floor and idforge.Registry.AddFloor). When the plugin first sees a
// model, before it draws the model's first ID, it gives an idforge
// registry one Floor per column it fills from a chain: the largest key in
// the model's table (integers as they are, decimal strings as numbers,
// padded radix strings byte by byte), 0 while the table does not exist. A
// chain whose rows also live in tables the plugin does not see (a table
// named with db.Table, another service's) needs a Floor of your own for
// them. The Floor reads through the *gorm.DB the plugin is registered on,
// on a connection of its own from its pool, outside any transaction and
// prepared statements: with a store not declared brand-new, do not limit
// the pool to one connection (as with SQLite), since the first read comes
// while a Create's transaction holds one.
//
// # Upserts
//
// With clause.OnConflict, every field the plugin fills (the key, chain and
// dated numbers, UUIDs) ends holding what the table holds, so that children
// created next go under a row that exists. A row inserted keeps what was
// drawn for it; one that meets a conflict takes the values of the row it
// met, with DoNothing as with UpdateAll and DoUpdates (those the update
// wrote, the stored ones elsewhere). Fields set before the create (by you
// or by [Fill]) are left as they are, and so is a key the database numbers,
// which GORM sets.
//
// The plugin reads rows back inside the create's transaction, on its
// connection but never through the session's prepared statements, and only
// when a row may have met a conflict: it reads the rows that hold a value
// drawn for them, then finds the rows the others met by
// clause.OnConflict.Columns (SQLite, PostgreSQL), by the key the database
// names or by the table's unique indexes (MySQL/MariaDB, where any of them
// counts). It reads nothing for upserts on the key and DoNothing that
// inserts every row (SQLite, PostgreSQL), nor for upserts without a
// conflict on MySQL/MariaDB (unless the database numbers the key): there it
// adds col = IF(LAST_INSERT_ID(...), col, col) on an integer column it
// fills, the key if it can, to ON DUPLICATE KEY UPDATE, so the INSERT says
// whether a row met a conflict, and for a single row with such a key which.
// The upserts GORM runs to save associations cost nothing more.
//
// When a row meets a conflict and the plugin cannot tell which row it met,
// DoNothing gives the row back the values it came with (nothing of it was
// written), and an update fails with an error wrapping [ErrUpsertRow] that
// says what to do, and rolls back: UpdateAll or DoUpdates without Columns
// (OnConstraint, or no target) on SQLite and PostgreSQL; on MySQL/MariaDB,
// a row of a batch (or with a string key) whose values different rows hold
// in different unique indexes, or that met an index on an expression or on
// a column the model does not map; a DoUpdates that changes the conflict
// columns. PostgreSQL's DoUpdates without a target fails so before it runs
// (PostgreSQL refuses it), and the duplicate-key error of UpdateAll without
// Columns, which GORM aims at the primary key, is wrapped so. A row that
// OnConflict.Where keeps from updating still gets the values of the row it
// met. With SkipDefaultTransaction the rows are read after the INSERT is
// committed, which an error cannot undo.
//
// # Errors
//
// Rows that cannot be filled — a nil element in a []*T, a nil pointer —
// fail with an error matching gorm.ErrInvalidData. A mistake in a tag (an unknown option, an empty kind, a bad format), a field
// type that cannot hold an ID, or a kind the registry does not know fails the
// first Create of the model, and every one after, with an error naming the
// model and the field that wraps engine.ErrInvalidConfig or
// engine.ErrUnknownGenerator. [Prepare] reports the same errors at start-up.
// A tag key one typo away from idgen (`idgne:"snowflake"`, `idgn:`, `IDGEN:`)
// is an error too; a key mangled further is invisible to any library, and a
// test that creates each model is what catches it.
//
// # Auto-increment
//
// GORM treats an integer primary key as auto-increment unless told
// otherwise. For the key fields it fills, the plugin turns that off on GORM's
// cached schema (unless the field says autoIncrement explicitly), so inserts
// carry the ID and PostgreSQL needs no RETURNING. Call [Prepare] before
// AutoMigrate to have the columns created as plain BIGINT rather than
// AUTO_INCREMENT, BIGSERIAL or AUTOINCREMENT: GORM's migrator has no hook
// through which the plugin could tell it.
//
// When the plugin first sees a model whose key it fills in a column that
// numbers rows itself (AUTO_INCREMENT, IDENTITY, a nextval default,
// AUTOINCREMENT: AutoMigrate ran before Prepare, or the table predates the
// plugin), it logs a warning through GORM's logger (or [Settings].Logger),
// once per table, naming the model and idplugin.Prepare. It reads the
// column from the database's catalogue on a connection of its own from the
// pool, never in the caller's transaction or prepared statements: a model
// first met inside a transaction is checked in the background, and the
// warning comes once a connection is free. Such tables keep working: the
// row gets the plugin's ID and the counter goes unused, so a table
// migrated from AUTO_INCREMENT keys on purpose needs nothing more.
package idplugin
