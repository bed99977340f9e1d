package sqlhook

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
)

// Settings configures [Open] and [Wrap]. The zero value draws from
// idforge.Default().
type Settings struct {
	// Registry is where markers draw their IDs: a registry from
	// idforge.New, or any engine.Provider. Nil (or a nil pointer) means
	// idforge.Default(), as for the GORM plugin: kind "snowflake" only,
	// safe for one instance unless IDFORGE_MACHINE_ID is set per instance.
	// The default registry is built at the first marker, so a database
	// that never sees one never builds it.
	Registry engine.Provider
}

// Open opens a database with the database/sql driver registered as
// driverName, as sql.Open does, through the plugin: markers from [Next]
// become IDs from s.Registry. Like sql.Open it does not connect.
func Open(driverName, dsn string, s Settings) (*sql.DB, error) {
	// database/sql does not export its driver lookup; a DB that never
	// connects is the way to it.
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, err
	}
	var c driver.Connector = dsnConnector{dsn: dsn, d: d}
	if dc, ok := d.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	}
	return sql.OpenDB(Wrap(c, s)), nil
}

// Wrap returns c with the plugin in front of it, for sql.OpenDB: markers
// from [Next] become IDs from s.Registry. c must not be nil.
func Wrap(c driver.Connector, s Settings) driver.Connector {
	return newConnector(c, &hook{reg: s.Registry, binaryUUID: binaryUUID(c.Driver())})
}

// binaryUUID reports whether d's UUIDs go in BINARY(16) columns, as 16
// bytes: MySQL/MariaDB, which have no uuid type of their own (MariaDB's
// UUID type takes the string too, but gormplugin's tables, and most, use
// BINARY(16)). Other drivers get the canonical string.
func binaryUUID(d driver.Driver) bool {
	t := reflect.TypeOf(d)
	if t == nil {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.HasPrefix(t.PkgPath(), "github.com/go-sql-driver/mysql")
}

// hook is the state one Open or Wrap shares between its connector, its
// driver and every connection: where the IDs come from.
type hook struct {
	once sync.Once
	reg  engine.Provider
	err  error

	binaryUUID bool // UUIDs are sent as 16 bytes, not as strings
}

// provider returns the registry, resolving the default on first use.
func (h *hook) provider() (engine.Provider, error) {
	h.once.Do(func() {
		if v := reflect.ValueOf(h.reg); h.reg != nil && !(v.Kind() == reflect.Pointer && v.IsNil()) {
			return
		}
		reg, err := idforge.Default()
		if err != nil {
			h.err = fmt.Errorf("sqlhook: the default registry: %w", err)
			return
		}
		h.reg = reg
	})
	return h.reg, h.err
}

// connector wraps a driver.Connector; it hands out wrapped connections.
type connector struct {
	base driver.Connector
	h    *hook
	d    driver.Driver // the base connector's driver, wrapped
}

func newConnector(c driver.Connector, h *hook) *connector {
	return &connector{base: c, h: h, d: wrapDriver(c.Driver(), h)}
}

// Connect implements driver.Connector.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	bc, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newConn(bc, c.h), nil
}

// Driver implements driver.Connector: the base driver, wrapped so that the
// connections it opens go through the plugin too.
func (c *connector) Driver() driver.Driver { return c.d }

// Close closes the base connector if it is an io.Closer: sql.DB.Close
// asks the connector it holds, which is this one.
func (c *connector) Close() error {
	if cl, ok := c.base.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// wrappedDriver wraps a driver.Driver.
type wrappedDriver struct {
	base driver.Driver
	h    *hook
}

// contextDriver is a wrappedDriver whose base is a driver.DriverContext.
type contextDriver struct{ *wrappedDriver }

func wrapDriver(d driver.Driver, h *hook) driver.Driver {
	if d == nil {
		return nil
	}
	w := &wrappedDriver{base: d, h: h}
	if _, ok := d.(driver.DriverContext); ok {
		return contextDriver{w}
	}
	return w
}

// Open implements driver.Driver.
func (d *wrappedDriver) Open(name string) (driver.Conn, error) {
	bc, err := d.base.Open(name)
	if err != nil {
		return nil, err
	}
	return newConn(bc, d.h), nil
}

// OpenConnector implements driver.DriverContext.
func (d contextDriver) OpenConnector(name string) (driver.Connector, error) {
	bc, err := d.base.(driver.DriverContext).OpenConnector(name)
	if err != nil {
		return nil, err
	}
	return newConnector(bc, d.h), nil
}

// dsnConnector is the connector of a driver that has none, as sql.Open
// makes it.
type dsnConnector struct {
	dsn string
	d   driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }
