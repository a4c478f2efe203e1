//go:build !race

package deploy

// e2eRaceFlags: see e2e_race_test.go.
var e2eRaceFlags []string
