package delivery

import (
	"net/http"

	"lavender/bark"
	"lavender/notify"
)

// Loaded is what LoadTargets found in the config dir.
type Loaded struct {
	Notifiers []notify.Notifier // every good target, file by file in name order
	Files     int               // target files read
	Warnings  []string          // files readable by others
}

// LoadTargets reads every channel's target files in dir (*.bark.env) and
// makes a notifier of each good target, sending with client (nil: the
// channel's shared one). err names each bad line as file:line; the good
// targets are loaded all the same.
func LoadTargets(dir string, client *http.Client) (Loaded, error) {
	res, err := bark.LoadTargets(dir)
	l := Loaded{Files: len(res.Files), Warnings: res.Warnings}
	for _, t := range res.Targets {
		l.Notifiers = append(l.Notifiers, bark.New(t, client, ""))
	}
	return l, err
}
