package app

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

// VersionText is version.Print's report without the lines the build left
// empty: a plain `go build` stamps no build user or date, and no tags.
// The revision and the commit's date come from the VCS stamp that `go
// build` embeds when it can.
func VersionText() string {
	settings := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	return versionText(settings)
}

// versionText is VersionText of the build settings given.
func versionText(settings map[string]string) string {
	var b strings.Builder
	b.WriteString("lavender, version " + version.Version)
	var about []string
	if version.Branch != "" {
		about = append(about, "branch: "+version.Branch)
	}
	if rev := version.GetRevision(); rev != "" && rev != "unknown" {
		about = append(about, "revision: "+rev)
	}
	if len(about) > 0 {
		b.WriteString(" (" + strings.Join(about, ", ") + ")")
	}
	line := func(key, value string) {
		if value != "" && value != "unknown" {
			fmt.Fprintf(&b, "\n  %-18s%s", key+":", value)
		}
	}
	line("build user", version.BuildUser)
	line("build date", version.BuildDate)
	line("commit date", settings["vcs.time"])
	line("go version", version.GoVersion)
	line("platform", version.GoOS+"/"+version.GoArch)
	line("tags", version.GetTags())
	return b.String()
}
