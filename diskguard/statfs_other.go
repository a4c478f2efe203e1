//go:build !linux

package diskguard

import "errors"

// Statfs is Linux's alone: lavender watches the disks of Linux training
// hosts. Elsewhere every path reads as unreadable with this error.
func Statfs(path string) (Stat, error) {
	return Stat{}, &PathError{Op: "statfs", Path: path, Err: errors.New("not supported on this system")}
}
