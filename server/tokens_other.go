//go:build !unix

package server

import "os"

// openTokens opens the tokens file.
func openTokens(path string) (*os.File, error) { return os.Open(path) }

// checkOwner has no owner to check off Unix.
func checkOwner(os.FileInfo) error { return nil }
