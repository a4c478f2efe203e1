// Package exporter holds the host's collectors and readers, in
// node_exporter's shape: swap, memory pressure and OOM kills from procfs,
// the kernel log's GPU and storage faults, and the accelerator a run uses.
// Each collector is built on its own and registered by cmd. The phase
// table and the heartbeat API's server side are package phaseserver.
package exporter

// DefaultProcFS is where procfs is mounted unless configured otherwise.
const DefaultProcFS = "/proc"
