package gormids

import (
	"errors"

	"github.com/idforge/idforge/internal/idgen"
	"gorm.io/gorm"
)

// InvalidData gives idforge's errors about the rows given the sentinel GORM
// users test for, so idplugin and shardgorm answer
// errors.Is(err, gorm.ErrInvalidData) alike: it returns err matching
// gorm.ErrInvalidData too when it wraps
// idgen.ErrInvalidData (an error in the rows given rather than in the
// configuration), and err itself otherwise.
func InvalidData(err error) error {
	if err == nil || !errors.Is(err, idgen.ErrInvalidData) || errors.Is(err, gorm.ErrInvalidData) {
		return err
	}
	return dataError{err}
}

type dataError struct{ err error }

func (e dataError) Error() string   { return e.err.Error() }
func (e dataError) Unwrap() []error { return []error{e.err, gorm.ErrInvalidData} }
