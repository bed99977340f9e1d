// Package sqlhook is idforge for database/sql, sqlx and sqlc users, in two
// parts: a driver plugin that puts freshly drawn IDs into the arguments of
// any statement, and sqlx helpers that fill the tagged ID fields of structs
// (see "The sqlx helpers" below).
//
// # The driver plugin
//
//	db, err := sqlhook.Open("pgx", dsn, sqlhook.Settings{Registry: reg}) // or sql.OpenDB(sqlhook.Wrap(connector, s))
//	id := sqlhook.Next("snowflake", "")
//	res, err := db.ExecContext(ctx, "INSERT INTO orders (id, customer) VALUES ($1, $2)", id, "ada")
//	key, err := res.LastInsertId() // the key now in the table, == id.ID()
//
// # Markers
//
// [Next] returns a marker that can stand for any argument of any statement:
// Exec, Query, QueryRow, prepared statements, statements in a transaction.
// Each execution draws a new ID of the marker's kind and name from
// [Settings].Registry and sends it in the marker's place; the marker then
// reports it ([Marker.ID]), and so does Result.LastInsertId — the first
// marker's ID when a statement has several (as MySQL reports the first key
// of a multi-row INSERT), on every driver: MySQL/MariaDB, SQLite, and pgx,
// which has no LastInsertId of its own. A statement without a marker gets
// the base driver's result untouched. Two markers draw two IDs; one marker
// given twice to one statement is one ID in both places.
//
// Kind "uuidv7" draws UUIDs ([Marker.UUID]), sent as 16 bytes for a
// BINARY(16) column through github.com/go-sql-driver/mysql and as the
// canonical string elsewhere (PostgreSQL's uuid, SQLite's TEXT); the base
// driver's package decides. [NextDated] draws dated business numbers
// (INV-20261125-000123, [Marker.Text]) from an *idforge.Registry with a
// store. Neither fits LastInsertId: it reports the first int64 marker's
// ID, and a statement with none keeps the base driver's result.
//
// The ID is drawn when the statement runs, in the wrapper's ExecContext or
// QueryContext (connection or prepared statement), never while database/sql
// converts the arguments: it converts them again when a driver answers
// driver.ErrSkip (MySQL with interpolateParams=false) and retries the
// statement through Prepare. An attempt the driver did not run (ErrSkip, or
// driver.ErrBadConn before a retry on another connection) leaves its IDs on
// the markers, and the retry takes them: one execution, one draw.
//
// Without the plugin a marker fails the statement when it is converted,
// with an error wrapping [ErrNotHooked] that says to open the database
// through sqlhook: never a zero key, never an ID from a registry the caller
// did not choose. The same happens with helpers that convert arguments
// themselves before the statement runs, such as sqlx.In.
//
// # The wrapper
//
// The wrapped connection offers every optional interface database/sql looks
// for (ExecerContext, QueryerContext, ConnPrepareContext, ConnBeginTx,
// SessionResetter, Validator, Pinger, NamedValueChecker) and passes each to
// the base connection; where the base lacks one, it does what database/sql
// does without it, so drivers behave as they do unwrapped. Arguments other
// than markers go to the base driver's own NamedValueChecker (or on to
// database/sql's conversion), prepared statements keep their
// ColumnConverter, and the connector's Driver() is the base driver, wrapped.
// Rows and transactions are the base driver's own.
//
// sql.Conn.Raw hands its function the wrapper; its Raw method returns the
// base driver's connection, as XSAM/otelsql's does:
//
//	err := conn.Raw(func(dc any) error {
//		pc := dc.(interface{ Raw() driver.Conn }).Raw().(*stdlib.Conn).Conn() // pgx, for CopyFrom
//		...
//	})
//
// # sqlx, GORM, sqlc
//
// sqlx: wrap the *sql.DB, sqlx.NewDb(db, "pgx"), and pass markers as
// arguments (also in NamedExec structs and maps); use Rebind for the
// placeholders. To fill the IDs of structs, use the helpers below: a driver
// sees only argument values and cannot write IDs back into structs.
//
// GORM: give GORM the wrapped *sql.DB as its connection
// (gorm.Open(mysql.New(mysql.Config{Conn: db})), postgres.New with Conn)
// and register the GORM plugin (idplugin) for models; markers then work in
// db.Exec and db.Raw. GORM's own statements carry no marker and pass
// through unchanged.
//
// sqlc: generated methods take typed parameters (an int64 for a BIGINT
// key), which cannot hold a marker. Draw the key from the same registry
// before the call, id, err := reg.NextID(ctx, "snowflake", ""), and pass
// it; the row's key is then id, whatever the driver's LastInsertId says.
// Hand-written statements on the same *sql.DB can still use markers.
//
// The registry is resolved at the first marker; Settings{} draws from
// idforge.Default(), which registers "snowflake" only. Kinds "chain" and
// "segment" need a registry built with a store.
//
// # The sqlx helpers
//
// [New] returns a [Helper] that gives rows inserted through
// github.com/jmoiron/sqlx their IDs before the insert, from the same `idgen`
// struct tags the GORM plugin reads:
//
//	type Order struct {
//		ID       int64  `db:"id" idgen:"snowflake"`
//		Code     string `db:"code" idgen:"chain,name=order,format=radix62"`
//		Customer string `db:"customer"`
//	}
//
//	ids := sqlhook.New(reg) // reg from idforge.New; nil means idforge.Default()
//	o := Order{Customer: "ada"}
//	_, err := ids.Insert(ctx, db, `INSERT INTO orders (id, code, customer) VALUES (:id, :code, :customer)`, &o)
//	// o.ID and o.Code are set
//
// A [Helper] draws from one engine.Provider (a registry) and caches, per
// struct type, the fields it fills and their generators. [Helper.Fill] fills
// a struct or a slice without inserting; [Helper.Insert] and
// [Helper.InsertBatch] fill and then run sqlx's NamedExecContext, the batch
// as multi-row INSERTs. Hand-written SQL takes an ID drawn from the registry
// (reg.NextID), or a [Next] marker through the driver plugin. Only zero values (0, "", nil pointers)
// are filled: a set ID is kept.
//
// The helpers run the SQL they are given and offer no upsert of their own:
// in an INSERT with ON CONFLICT or ON DUPLICATE KEY UPDATE, a row that meets
// a conflict is not inserted and keeps the ID drawn for it, which is not its
// row's; read the key back by the conflict columns, as the GORM plugin does
// for its upserts.
//
// Without a registry (New(nil)) the helper uses idforge.Default(): kind
// "snowflake" on machine.Default()'s machine ID (safe for a single instance
// unless IDFORGE_MACHINE_ID is set per instance). Chains ("chain",
// "segment") need a registry built with a store.
//
// The helpers fill IDs at the struct level because the driver plugin sees
// only argument values and could not write the IDs back into the caller's
// structs; the plugin, in turn, needs no struct and answers LastInsertId.
//
// The package imports database/sql, sqlx, the root registry, the engine
// and the shared tag parsing in internal/; nothing imports it but
// shardsqlx.
package sqlhook
