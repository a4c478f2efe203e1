package main

import (
	"github.com/lavender-ml/lavender/watchpush"
)

// barkLevelFlags set how loud the watchdog's pushes are, by kind.
type barkLevelFlags struct {
	BarkLevel []string `name:"bark.level" placeholder:"EVENT=LEVEL,..." help:"Bark level of the watchdog's pushes by event, e.g. failed=timeSensitive,oom=active. Events: ${bark_level_events}. Levels: ${bark_levels}. Every event is passive unless listed; a level the template line sets itself wins, and Alertmanager's alerts keep their template's level."`
}

func (f *barkLevelFlags) levels() (watchpush.Levels, error) {
	return watchpush.ParseLevels(f.BarkLevel)
}
