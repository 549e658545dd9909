package ageaware

import (
	"context"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

// MaxExhaustive is the largest number of schedules, (t_agg + 1)^m, that
// Exhaustive enumerates.
const MaxExhaustive = 1 << 24

// Objective scores a schedule given as ages aᵢ = t_agg − t_{c,i}; lower is
// better. It must not retain ages.
type Objective func(ages []int) float64

// Schedules returns (t_agg + 1)^m, the number of schedules, or +Inf when it
// overflows float64's integers.
func (p *Problem) Schedules() float64 {
	return math.Pow(float64(p.T+1), float64(p.m))
}

// SearchResult is the outcome of a schedule search.
type SearchResult struct {
	Schedule    Schedule
	Value       float64 // the objective at Schedule
	Evaluations int     // objective evaluations spent
}

// Exhaustive evaluates obj on all (t_agg + 1)^m schedules and returns the best
// (ties go to the first in lexicographic order of the collection times). It
// refuses more than MaxExhaustive schedules and stops with ctx's error.
func (p *Problem) Exhaustive(ctx context.Context, obj Objective) (*SearchResult, error) {
	total := p.Schedules()
	if total > MaxExhaustive {
		return nil, fmt.Errorf("ageaware: exhaustive search over (t_agg + 1)^m = %d^%d = %.3g schedules, want at most %d (use coordinate descent): %w", p.T+1, p.m, total, MaxExhaustive, privacy.ErrInvalidArgument)
	}
	ages := make([]int, p.m)
	for i := range ages {
		ages[i] = p.T // collection time 0 first
	}
	best := &SearchResult{Value: math.Inf(1)}
	bestAges := make([]int, p.m)
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := obj(ages)
		best.Evaluations++
		if n == 0 || v < best.Value {
			best.Value = v
			copy(bestAges, ages)
		}
		// Next schedule: collection times in lexicographic order, the
		// last client fastest (its age decreasing).
		i := p.m - 1
		for i >= 0 && ages[i] == 0 {
			ages[i] = p.T
			i--
		}
		if i < 0 {
			break
		}
		ages[i]--
	}
	best.Schedule = agesToSchedule(bestAges, p.T)
	return best, nil
}

func agesToSchedule(ages []int, T int) Schedule {
	s := make(Schedule, len(ages))
	for i, a := range ages {
		s[i] = T - a
	}
	return s
}

// CoordinateDescent minimizes obj by cyclic coordinate descent over the
// clients' collection times from each of the starting schedules (all fresh,
// all oldest, and start when not nil): for each client in turn it tries every
// collection time with the others fixed and keeps the best, until a whole
// sweep changes nothing. Each start then ends at a coordinatewise minimum (no
// single client can improve alone); the best of them is returned. This is not
// guaranteed to be the global minimum (Theorem 1's bound is not separable
// over clients, see the package documentation); its cost is
// O(sweeps·m·(t_agg + 1)) evaluations instead of (t_agg + 1)^m. It stops with
// ctx's error.
func (p *Problem) CoordinateDescent(ctx context.Context, obj Objective, start Schedule) (*SearchResult, error) {
	var starts [][]int
	fresh, old := make([]int, p.m), make([]int, p.m)
	for i := range old {
		old[i] = p.T
	}
	starts = append(starts, fresh, old)
	if start != nil {
		if err := p.checkSchedule(start); err != nil {
			return nil, err
		}
		starts = append(starts, start.Ages(p.T))
	}
	best := &SearchResult{Value: math.Inf(1)}
	var bestAges []int
	for _, st := range starts {
		ages := append([]int(nil), st...)
		cur := obj(ages)
		best.Evaluations++
		for sweep := 0; ; sweep++ {
			changed := false
			for i := range ages {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				keep := ages[i]
				bi, bv := keep, cur
				for a := 0; a <= p.T; a++ {
					if a == keep {
						continue
					}
					ages[i] = a
					v := obj(ages)
					best.Evaluations++
					if v < bv-1e-12*math.Abs(bv) {
						bi, bv = a, v
					}
				}
				ages[i] = bi
				if bi != keep {
					changed = true
					cur = bv
				}
			}
			if !changed || sweep > 10*p.m*(p.T+1) {
				break
			}
		}
		if cur < best.Value || bestAges == nil {
			best.Value = cur
			bestAges = append(bestAges[:0], ages...)
		}
	}
	best.Schedule = agesToSchedule(bestAges, p.T)
	return best, nil
}
