package pld

// Cache keeps the last compositions an accountant built, keyed by their count
// (steps or epochs), and drops the oldest first once it holds its size. The
// accountants of this package and of packages allocation and shuffle keep
// their composed PLDs in one, so that asking once per epoch, or several δ at
// the same count, costs one composition each. A Cache is not safe for
// concurrent use: its owner holds its own lock around it.
type Cache[V any] struct {
	size  int
	vals  map[int]V
	order []int // insertion order of the keys
}

// NewCache returns an empty Cache that holds at most size ≥ 1 values.
func NewCache[V any](size int) *Cache[V] {
	return &Cache[V]{size: size, vals: make(map[int]V, size)}
}

// Get returns the value kept for n, if any.
func (c *Cache[V]) Get(n int) (V, bool) {
	v, ok := c.vals[n]
	return v, ok
}

// Put keeps v for n (not already kept), first dropping the oldest value if
// the cache is full.
func (c *Cache[V]) Put(n int, v V) {
	if len(c.order) >= c.size {
		delete(c.vals, c.order[0])
		c.order = c.order[1:]
	}
	c.vals[n] = v
	c.order = append(c.order, n)
}
