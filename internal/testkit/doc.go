// Package testkit holds the helpers lavender's tests share: a synchronised
// buffer, WaitFor, a fake procfs, a metric reader, self-signed TLS with an
// exporter-toolkit web config, and StartCommand, which runs the real
// lavender binary. The Bark stand-in is its sibling, internal/barktest.
//
// It imports nothing of lavender's, so every package's tests may use it
// without a cycle (internal/layout's TestPackagesKeepTheirLayer keeps it so). Nothing in it
// asserts on timing: every wait has a generous deadline that only ends a
// test that would otherwise hang.
package testkit
