package main

import (
	"math"
	"testing"
)

// FuzzNumberFlags: the count and real flag parsers accept only what they
// promise (whole numbers in range; finite reals) and never panic.
func FuzzNumberFlags(f *testing.F) {
	for _, s := range []string{"1", "0", "-3", "1.5", "1e3", "NaN", "Inf", "-Inf", " 7 ", "9007199254740993", "0x10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := -12345
		if err := (countFlag{dst: &n, min: 1}).Set(s); err == nil {
			if n < 1 || n > 1<<53 {
				t.Fatalf("count %q accepted as %d", s, n)
			}
		} else if n != -12345 {
			t.Fatalf("count %q refused but wrote %d", s, n)
		}
		x := -1.5
		if err := (realFlag{dst: &x}).Set(s); err == nil {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("real %q accepted as %v", s, x)
			}
		} else if x != -1.5 {
			t.Fatalf("real %q refused but wrote %v", s, x)
		}
	})
}
