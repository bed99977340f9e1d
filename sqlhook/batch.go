package sqlhook

import (
	"context"
	"fmt"
	"reflect"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// maxPlaceholders caps the bind parameters of one statement: SQLite's
// default limit (MySQL/MariaDB and PostgreSQL allow 65,535).
const maxPlaceholders = 32766

// insertBatches sends rows in multi-row INSERTs through sqlx's bulk
// NamedExecContext; it fills no IDs (InsertBatch fills the rows first). It
// runs query, a one-row INSERT ... VALUES (:a, :b) that sqlx repeats
// for every row of a chunk, over rows, a slice or an addressable array of
// structs or of pointers to them. Chunks hold batchSize rows
// (idgen.DefaultBatchSize if batchSize <= 0), fewer if that would pass
// [maxPlaceholders]; each is a statement of its own. It returns the number
// of rows affected.
func insertBatches(ctx context.Context, db sqlx.ExtContext, query string, rows reflect.Value, batchSize int) (int64, error) {
	n := rows.Len()
	if n == 0 {
		return 0, nil
	}
	_, args, err := db.BindNamed(query, rows.Index(0).Interface())
	if err != nil {
		return 0, err
	}
	if batchSize <= 0 {
		batchSize = idgen.DefaultBatchSize
	}
	batchSize = max(min(batchSize, maxPlaceholders/max(len(args), 1)), 1)
	if rows.Kind() == reflect.Array {
		if !rows.CanAddr() {
			return 0, fmt.Errorf("%w: pass a pointer to the array", engine.ErrInvalidConfig)
		}
		rows = rows.Slice(0, n)
	}
	var total int64
	for i := 0; i < n; i += batchSize {
		res, err := sqlx.NamedExecContext(ctx, db, query, rows.Slice(i, min(i+batchSize, n)).Interface())
		if err != nil {
			return total, fmt.Errorf("rows %d to %d: %w", i, min(i+batchSize, n)-1, err)
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += affected
	}
	return total, nil
}
