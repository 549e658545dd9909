package pld

import "testing"

// TestCacheOldestOut checks that a full Cache drops the oldest key first,
// whatever was read since, and keeps the newest size keys.
func TestCacheOldestOut(t *testing.T) {
	const size = 3
	c := NewCache[string](size)
	if _, ok := c.Get(1); ok {
		t.Fatal("empty cache: Get(1) found a value")
	}
	names := map[int]string{10: "a", 20: "b", 30: "c", 40: "d", 50: "e"}
	order := []int{10, 20, 30, 40, 50}
	for i, n := range order {
		c.Put(n, names[n])
		for j, m := range order[:i+1] {
			v, ok := c.Get(m)
			want := j > i-size // the newest size keys stay
			if ok != want {
				t.Fatalf("after putting %v: Get(%d) found = %v, want %v", order[:i+1], m, ok, want)
			}
			if ok && v != names[m] {
				t.Fatalf("Get(%d) = %q, want %q", m, v, names[m])
			}
		}
	}
}
