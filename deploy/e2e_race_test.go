//go:build race

package deploy

// e2eRaceFlags builds lavender with the race detector when the tests run
// with it, so the end-to-end test also looks for data races in the real
// process under real traffic.
var e2eRaceFlags = []string{"-race"}
