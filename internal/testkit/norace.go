//go:build !race

package testkit

// raceBuild: see race.go.
const raceBuild = false
