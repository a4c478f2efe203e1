// Package ring is a fixed-size buffer that keeps the newest values: the
// watchdog's sample history and the bridge's recent pushes. It takes no
// lock; its users already hold one around the state it is part of.
package ring

// Ring keeps the newest Cap values pushed to it, dropping the oldest.
type Ring[T any] struct {
	buf  []T // oldest at head once full
	head int
}

// New returns an empty ring that keeps capacity values (at least one).
func New[T any](capacity int) *Ring[T] {
	return &Ring[T]{buf: make([]T, 0, max(capacity, 1))}
}

// Push adds v, dropping the oldest value if the ring is full.
func (r *Ring[T]) Push(v T) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.head] = v
	r.head = (r.head + 1) % len(r.buf)
}

// Len is how many values the ring holds.
func (r *Ring[T]) Len() int { return len(r.buf) }

// Cap is how many values the ring keeps.
func (r *Ring[T]) Cap() int { return cap(r.buf) }

// Newest returns the value pushed last; ok is false while the ring is empty.
func (r *Ring[T]) Newest() (v T, ok bool) {
	if len(r.buf) == 0 {
		return v, false
	}
	return r.buf[(r.head+len(r.buf)-1)%len(r.buf)], true
}

// OldestFirst returns the values, oldest first, in a new slice.
func (r *Ring[T]) OldestFirst() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.head:]...)
	return append(out, r.buf[:r.head]...)
}

// NewestFirst returns the values, newest first, in a new slice.
func (r *Ring[T]) NewestFirst() []T {
	out := make([]T, 0, len(r.buf))
	for i := len(r.buf) - 1; i >= 0; i-- {
		out = append(out, r.buf[(r.head+i)%len(r.buf)])
	}
	return out
}
