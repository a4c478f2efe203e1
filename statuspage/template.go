package statuspage

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lavender-ml/lavender/pushtext"
)

// pageTemplate is status.html. html/template escapes every value by its
// context (text, attribute, URL), so a phase name, an alert's text or a
// run-log line shows as text whatever it holds. It is parsed when the
// page is first rendered: every lavender command loads this package, and
// only the serving ones show the page.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("status.html").Funcs(template.FuncMap{
		"percent":  func(r float64) string { return strconv.Itoa(int(math.Round(r*100))) + "%" },
		"deref":    func(r *float64) float64 { return *r },
		"bytesOf":  func(b *uint64) uint64 { return *b },
		"watts":    func(w float64) string { return strconv.Itoa(int(math.Round(w))) + " W" },
		"gib":      func(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<30)) },
		"age":      func(now, t time.Time) string { return humanDuration(now.Sub(t)) },
		"seconds":  func(s float64) string { return humanDuration(time.Duration(s * float64(time.Second))) },
		"duration": humanDuration,
		"clock":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"hms":      func(t time.Time) string { return t.Local().Format("15:04:05") },
		"when":     when,
		"after":    func(t time.Time, d time.Duration) time.Time { return t.Add(d) },
		"bytes":    pushtext.HumanBytes,
		"ibytes":   pushtext.HumanIBytes,
		"human":    pushtext.HumanDuration,
		"short":    ShortText,
		"join":     strings.Join,
	}).ParseFS(files, "status.html"))
})

// when is t as a person near now reads it: the time of day when t is
// today, with the date otherwise.
func when(now, t time.Time) string {
	now, t = now.Local(), t.Local()
	if y, m, d := now.Date(); t.Year() == y && t.Month() == m && t.Day() == d {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}
