package repo

import (
	"database/sql/driver"
	"fmt"
	"io"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// pgError stands for pgconn.PgError, which tells its SQLSTATE.
type pgError string

func (e pgError) Error() string    { return "ERROR (SQLSTATE " + string(e) + ")" }
func (e pgError) SQLState() string { return string(e) }

// A COMMIT the server answered is refused for certain; one whose
// connection failed, or that the server ended, is not.
func TestRefusedAndConnLost(t *testing.T) {
	for _, c := range []struct {
		err           error
		refused, lost bool
	}{
		{pgError("23505"), true, false}, // deferred unique violation
		{pgError("40001"), true, false}, // serialization failure
		{pgError("40P01"), true, false}, // deadlock
		{pgError("57P01"), false, true}, // pg_terminate_backend
		{pgError("08006"), false, true}, // connection failure
		{pgError("XX000"), false, false},
		{&mysql.MySQLError{Number: 1213}, true, false}, // deadlock
		{&mysql.MySQLError{Number: 1927}, false, true}, // connection killed
		{mysql.ErrInvalidConn, false, true},
		{driver.ErrBadConn, false, true},
		{io.ErrUnexpectedEOF, false, true},
		{fmt.Errorf("commit: %w", io.EOF), false, true},
		{fmt.Errorf("something else"), false, false},
	} {
		if got := Refused(c.err); got != c.refused {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.refused)
		}
		if got := ConnLost(c.err); got != c.lost {
			t.Errorf("ConnLost(%v) = %v, want %v", c.err, got, c.lost)
		}
	}
}
