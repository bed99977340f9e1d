package shardsqlx

// SetMaxPlaceholders lowers the placeholder limit of r, so tests can cut a
// shard's rows into several statements without 32,766 parameters.
func SetMaxPlaceholders(r *Repository, n int) { r.maxParams = n }
