package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/phaseserver"
)

// openDiskGuard builds the guard of the fixed paths and the phases'
// directories, and registers its metrics.
func openDiskGuard(paths []string, exp *phaseserver.Server, env Env, reg prometheus.Registerer) (*diskguard.Guard, error) {
	guard, err := diskguard.New(diskguard.Config{
		Paths:   paths,
		Writers: exp.DiskWriters,
		Stat:    env.Statfs,
		Now:     env.Clock,
		Logger:  env.Logger,
	})
	if err != nil {
		return nil, err
	}
	if err := reg.Register(guard.Collector()); err != nil {
		return nil, fmt.Errorf("disk guard: register metrics: %w", err)
	}
	return guard, nil
}
