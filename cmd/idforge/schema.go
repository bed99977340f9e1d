package main

import (
	"context"
	"flag"
	"io"

	"github.com/idforge/idforge/engine/sqlstore"
)

func setupSchema(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
	dialect := fs.String("dialect", "mysql", "SQL `dialect`: mysql (also MariaDB), postgres or sqlite")
	prefix := fs.String("prefix", sqlstore.DefaultTablePrefix, "table name `prefix`")
	return func(_ context.Context, args []string, stdout io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		d, err := sqlstore.ParseDialect(*dialect)
		if err != nil {
			return err
		}
		ddl, err := sqlstore.DDL(d, *prefix)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, ddl)
		return err
	}
}
