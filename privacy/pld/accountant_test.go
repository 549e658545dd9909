package pld

import (
	"errors"
	"strings"
	"testing"
)

// TestPoissonAccountantTinySigma: a σ so small that the loss range alone needs an interval
// above 1 is refused with ErrGridTooLarge and a readable message, never a nil cause.
func TestPoissonAccountantTinySigma(t *testing.T) {
	acc, err := NewPoissonAccountant(0.01, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acc.Epsilon(10, 1e-5)
	if !errors.Is(err, ErrGridTooLarge) || strings.Contains(err.Error(), "%!") {
		t.Fatalf("err = %v, want ErrGridTooLarge with a readable message", err)
	}
}
