package bark

import (
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

// A push's level goes to Bark in clear and in ciphertext alike; passive
// when the push names none; and a level the template sets itself wins.
func TestPushLevel(t *testing.T) {
	const key = "0123456789abcdef"
	srv := barktest.New(t, "KEY")
	enc := EncryptionKey + "=aes-128-cbc:" + key + "\n"
	for _, tc := range []struct {
		name, file, level, want string
		encrypted               bool
	}{
		{"none: passive", srv.Template("KEY"), "", LevelPassive, false},
		{"a louder push", srv.Template("KEY"), LevelTimeSensitive, LevelTimeSensitive, false},
		{"the template's own level wins", srv.Template("KEY") + "?level=active", LevelCritical, LevelActive, false},
		{"encrypted, a louder push", enc + srv.Template("KEY"), LevelCritical, LevelCritical, true},
		{"encrypted, passive", enc + srv.Template("KEY"), "", LevelPassive, true},
		{"encrypted, the template's own wins", enc + srv.Template("KEY") + "?level=timeSensitive", LevelCritical, LevelTimeSensitive, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := load(t, map[string]string{"phone.bark.env": tc.file})
			before := srv.Count()
			if _, err := New(ts[0], nil, "").Notify(t.Context(), Push{Text: "m", Level: tc.level}); err != nil {
				t.Fatal(err)
			}
			got := srv.Pushes()[before]
			level, archive := got.Level, got.IsArchive
			if tc.encrypted {
				plain := barktest.AppDecrypt(t, "cbc", key, got.Params["iv"], got.Params["ciphertext"])
				level, archive = plain["level"], plain["isarchive"]
			}
			if level != tc.want || archive != "0" {
				t.Errorf("level %q isArchive %q, want %s and 0", level, archive, tc.want)
			}
		})
	}
}
