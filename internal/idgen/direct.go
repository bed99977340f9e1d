package idgen

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
)

// ErrInvalidData is engine.ErrInvalidData, short for the fillers' errors.
var ErrInvalidData = engine.ErrInvalidData

// rowPointer is the address of a row of a Filler's struct type.
type rowPointer = unsafe.Pointer

// fillDirect fills n rows of a filler whose slots are all direct, the rows
// size bytes apart from base: the hot path of slices of structs, written so
// that a model with one int64 key costs the draw and little more.
func (f *Filler) fillDirect(ctx context.Context, base unsafe.Pointer, size uintptr, n int) error {
	if len(f.slots) == 1 && f.slots[0].kind == reflect.Int64 {
		s := &f.slots[0]
		return s.fillInt64s(ctx, unsafe.Add(base, s.offset), size, n)
	}
	for i := range n {
		row := unsafe.Add(base, uintptr(i)*size)
		for j := range f.slots {
			if err := f.slots[j].fillDirect(ctx, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillDirect fills a direct slot of the row at p: the field is an int64,
// uint64 or string kind (named types and 64-bit int and uint included) at
// s.offset, so it is read and written in place without reflection, which
// costs more than the draw itself. p points to a live row of the filler's
// type, whose layout newSlot computed the offset from.
func (s *slot) fillDirect(ctx context.Context, p rowPointer) error {
	at := unsafe.Add(p, s.offset)
	switch s.kind {
	case reflect.Int64:
		return s.fillInt64s(ctx, at, 0, 1)
	case reflect.Uint64:
		n := (*uint64)(at)
		if *n != 0 {
			return nil
		}
		id, err := s.draw(ctx)
		if err != nil {
			return err
		}
		if id < 0 {
			return fmt.Errorf("%w: model %s field %s: negative id %d for an unsigned field", engine.ErrInvalidID, s.Model, s.Name, id)
		}
		*n = uint64(id)
	case reflect.Array:
		u := (*[16]byte)(at)
		if *u != [16]byte{} {
			return nil
		}
		v, err := s.uuid.NextUUID(ctx)
		if err != nil {
			return s.drawError(err)
		}
		*u = v
	default:
		str := (*string)(at)
		if *str != "" {
			return nil
		}
		v, err := s.drawString(ctx)
		if err != nil {
			return err
		}
		*str = v
	}
	return nil
}

// fill fills v, a value of the slot's field type, when it is zero: the
// reflective path, for fields behind pointers and rows that are not
// addressable.
func (s *slot) fill(ctx context.Context, v reflect.Value) error {
	if !s.IsZero(v) {
		return nil
	}
	if s.kind == reflect.Int64 || s.kind == reflect.Uint64 {
		id, err := s.draw(ctx)
		if err != nil {
			return err
		}
		return s.Set(v, id)
	}
	v, err := s.settable(v)
	if err != nil {
		return err
	}
	if s.kind == reflect.Array {
		u, err := s.uuid.NextUUID(ctx)
		if err != nil {
			return s.drawError(err)
		}
		reflect.Copy(v, reflect.ValueOf(u[:]))
		return nil
	}
	str, err := s.drawString(ctx)
	if err != nil {
		return err
	}
	v.SetString(str)
	return nil
}

// drawString draws the value of a string field: a dated chain's string, a
// UUID's canonical form, or an ID in the field's format.
func (s *slot) drawString(ctx context.Context) (string, error) {
	switch {
	case s.str != nil:
		v, err := s.str(ctx)
		if err != nil {
			return "", s.drawError(err)
		}
		return v, nil
	case s.uuid != nil:
		u, err := s.uuid.NextUUID(ctx)
		if err != nil {
			return "", s.drawError(err)
		}
		return uuid.UUID(u).String(), nil
	}
	id, err := s.draw(ctx)
	if err != nil {
		return "", err
	}
	return s.format.Format(id), nil
}

// fillInt64s fills the n int64 fields that are zero among those size bytes
// apart from the first at p: one row's, or the key of every row of a slice,
// in a loop as tight as setting the field by hand.
func (s *slot) fillInt64s(ctx context.Context, p unsafe.Pointer, size uintptr, n int) error {
	gen := s.gen
	for i := range n {
		key := (*int64)(unsafe.Add(p, uintptr(i)*size))
		if *key != 0 {
			continue
		}
		id, err := gen.NextID(ctx)
		if err != nil {
			return s.drawError(err)
		}
		*key = id
	}
	return nil
}

func (s *slot) draw(ctx context.Context) (int64, error) {
	id, err := s.gen.NextID(ctx)
	if err != nil {
		return 0, s.drawError(err)
	}
	return id, nil
}

func (s *slot) drawError(err error) error {
	return fmt.Errorf("model %s field %s: %w", s.Model, s.Name, err)
}
