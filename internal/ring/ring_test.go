package ring

import (
	"fmt"
	"slices"
	"testing"
)

func TestRing(t *testing.T) {
	for _, tc := range []struct {
		capacity, pushes int
		oldestFirst      []int
	}{
		{3, 0, []int{}},
		{3, 1, []int{0}},
		{3, 3, []int{0, 1, 2}},
		{3, 4, []int{1, 2, 3}},
		{3, 7, []int{4, 5, 6}},
		{3, 9, []int{6, 7, 8}},
		{1, 5, []int{4}},
		{0, 2, []int{1}}, // a ring keeps at least one value
	} {
		t.Run(fmt.Sprintf("cap %d, %d pushes", tc.capacity, tc.pushes), func(t *testing.T) {
			r := New[int](tc.capacity)
			for i := range tc.pushes {
				r.Push(i)
			}
			if got := r.OldestFirst(); !slices.Equal(got, tc.oldestFirst) {
				t.Errorf("OldestFirst = %v, want %v", got, tc.oldestFirst)
			}
			newest := slices.Clone(tc.oldestFirst)
			slices.Reverse(newest)
			if got := r.NewestFirst(); !slices.Equal(got, newest) {
				t.Errorf("NewestFirst = %v, want %v", got, newest)
			}
			if r.Len() != len(tc.oldestFirst) || r.Cap() != max(tc.capacity, 1) {
				t.Errorf("Len %d Cap %d, want %d and %d", r.Len(), r.Cap(), len(tc.oldestFirst), max(tc.capacity, 1))
			}
			v, ok := r.Newest()
			if ok != (tc.pushes > 0) || (ok && v != tc.pushes-1) {
				t.Errorf("Newest = %d, %v after %d pushes", v, ok, tc.pushes)
			}
		})
	}
}

// The slices returned are copies: changing one leaves the ring as it was.
func TestRingReturnsCopies(t *testing.T) {
	r := New[int](2)
	r.Push(1)
	r.Push(2)
	r.OldestFirst()[0] = 99
	r.NewestFirst()[0] = 99
	if got := r.OldestFirst(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("ring changed through a returned slice: %v", got)
	}
}
