package main

import (
	"context"
	"flag"
	"io"

	"github.com/idforge/idforge/schema"
)

func setupSchema(fs *flag.FlagSet) runFunc {
	dialect := fs.String("dialect", "mysql", "SQL `dialect`: mysql (also MariaDB), postgres or sqlite")
	prefix := fs.String("prefix", "idforge_", "table name `prefix`")
	return func(_ context.Context, args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		d, err := schema.ParseDialect(*dialect)
		if err != nil {
			return err
		}
		ddl, err := schema.DDL(d, *prefix)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, ddl)
		return err
	}
}
