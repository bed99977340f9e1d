package gormids

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idforge/idforge/internal/idgen"
	"gorm.io/gorm"
)

func TestInvalidData(t *testing.T) {
	rows := fmt.Errorf("%w: nil *Order", idgen.ErrInvalidData)
	got := InvalidData(rows)
	if !errors.Is(got, gorm.ErrInvalidData) || !errors.Is(got, idgen.ErrInvalidData) || got.Error() != rows.Error() {
		t.Errorf("InvalidData(%v) = %v: want both sentinels and the same message", rows, got)
	}
	if again := InvalidData(got); again != got {
		t.Errorf("wrapped twice: %#v", again)
	}
	other := errors.New("connection refused")
	if got := InvalidData(other); got != other || errors.Is(got, gorm.ErrInvalidData) {
		t.Errorf("InvalidData(%v) = %v: other errors pass through as they are", other, got)
	}
	if InvalidData(nil) != nil {
		t.Error("InvalidData(nil) != nil")
	}
}
