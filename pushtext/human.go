package pushtext

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

// HumanDuration writes d the way a person reads it: seconds under a
// minute ("45s"), whole minutes under an hour ("10m", so a stall seen a
// poll after its 10 minutes still reads "10m"), hours and minutes under a
// day ("4h12m", "4h"), then days and hours ("3d4h"). Every unit is cut, not
// rounded; under a second is "0s".
func HumanDuration(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	s := int64(d / time.Second)
	days, hours, mins, secs := s/86400, s/3600%24, s/60%60, s%60
	part := func(n int64, unit string) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("%d%s", n, unit)
	}
	switch {
	case days > 0:
		return part(days, "d") + part(hours, "h")
	case hours > 0:
		return part(hours, "h") + part(mins, "m")
	case mins > 0:
		return part(mins, "m")
	}
	return part(secs, "s")
}

// HumanBytes writes a size in binary units the way df -h does, with the
// units swap's pushes use: "512 B", "9.8 GB" under ten, "16 MB" from ten.
func HumanBytes(n uint64) string { return humanSize(n, pushUnits) }

// HumanIBytes is HumanBytes with the binary units named as such ("9.8
// GiB", "16 MiB"), for pages that label what they measure; the pushes keep
// the predecessor's "GB".
func HumanIBytes(n uint64) string { return humanSize(n, binaryUnits) }

var (
	pushUnits   = []string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
)

func humanSize(n uint64, units []string) string {
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%d B", n)
	case v < 9.95:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}

// MinFree is a disk floor as a person wrote it: "5%", "10 GB", "512 MiB",
// "2G". A size keeps the unit it was given in: a decimal 10GB in
// HumanBytes's binary units would read "9.3 GB", a floor the user never
// set, and a share keeps its number (7% divided by 100 and multiplied back
// is 7.000000000000001%). A floor made in code, with no unit, reads in
// HumanBytes's units.
func MinFree(m watchdog.MinFree) string {
	num := strconv.FormatFloat(m.Num, 'f', -1, 64)
	switch {
	case m.Unit == "%":
		return num + "%"
	case m.Unit == "K" || m.Unit == "M" || m.Unit == "G" || m.Unit == "T":
		return num + m.Unit // df's bare binary units, written as df writes them: "2G"
	case m.Unit != "":
		return num + " " + m.Unit
	case m.Bytes > 0:
		return HumanBytes(m.Bytes)
	}
	return strconv.FormatFloat(m.Ratio*100, 'f', -1, 64) + "%"
}
