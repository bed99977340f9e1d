package repo

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// sqlState is a server's error carrying its SQLSTATE, as PostgreSQL's
// (pgconn.PgError) does.
type sqlState interface{ SQLState() string }

// ConnLost reports whether err is the connection failing, not the server
// answering a statement: the driver gave the connection up
// (driver.ErrBadConn), the socket closed or broke, or the server ended the
// session (PostgreSQL's classes 08, connection exception, and 57,
// operator intervention such as pg_terminate_backend; MySQL's server
// shutdown and killed connection).
func ConnLost(err error) bool {
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) {
		return true
	}
	var st sqlState
	if errors.As(err, &st) {
		code := st.SQLState()
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57")
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1053, 1317, 1927, 3169: // shutdown, query interrupted, connection killed, session killed
			return true
		}
	}
	return false
}

// Refused reports whether err, a COMMIT's, is the server's answer that
// it refused the transaction (a deferred constraint, a serialization
// failure), which it then rolled back: not a lost connection, after
// which only the database knows whether the COMMIT took effect.
func Refused(err error) bool {
	var st sqlState
	var my *mysql.MySQLError
	if !errors.As(err, &st) && !errors.As(err, &my) {
		return false
	}
	if st != nil && (strings.HasPrefix(st.SQLState(), "58") || strings.HasPrefix(st.SQLState(), "XX")) {
		return false // a system or internal error: the server may be failing
	}
	return !ConnLost(err)
}
