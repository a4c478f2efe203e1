//go:build race

package testkit

// raceBuild: the tests run under -race, so the binary they start is built
// with it too, and a race in the child fails the test that started it.
const raceBuild = true
