package pushtext

import (
	"math"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/watchdog"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{900 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{59*time.Second + 999*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{10*time.Minute + 4*time.Second, "10m"},
		{59*time.Minute + 59*time.Second, "59m"},
		{time.Hour, "1h"},
		{4*time.Hour + 12*time.Minute + 30*time.Second, "4h12m"},
		{26 * time.Hour, "1d2h"},
		{72*time.Hour + 5*time.Minute, "3d"},
		{-time.Minute, "0s"},
	} {
		if got := HumanDuration(tc.d); got != tc.want {
			t.Errorf("HumanDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	const gi = 1 << 30
	for n, want := range map[uint64]string{0: "0 B", 512: "512 B", 1536: "1.5 KB", 16 * mib: "16 MB", 24 * mib: "24 MB",
		98 << 27: "12 GB", 9*gi + gi/2: "9.5 GB", 10*gi - 1: "10 GB", 250 * gi: "250 GB", 1 << 40: "1.0 TB", math.MaxUint64: "16 EB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	// The same sizes with their binary units named, as the status page shows them.
	for n, want := range map[uint64]string{512: "512 B", 1536: "1.5 KiB", 16 * mib: "16 MiB", 9*gi + gi/2: "9.5 GiB", 1 << 40: "1.0 TiB"} {
		if got := HumanIBytes(n); got != want {
			t.Errorf("HumanIBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMinFree: a floor reads as it was written, a share or a size, and
// the parsed default reads as the flag's default.
func TestMinFree(t *testing.T) {
	for _, tc := range []struct {
		floor watchdog.MinFree
		want  string
	}{
		{watchdog.MinFree{Ratio: 0.05}, "5%"},
		{watchdog.MinFree{Ratio: 0.005}, "0.5%"},
		{watchdog.MinFree{Bytes: 20 << 30}, "20 GB"},
		{watchdog.MinFree{Bytes: 512 << 20, Ratio: 0.05}, "512 MB"},
		{watchdog.DefaultMinFree(), watchdog.DefaultDiskMinFree},
	} {
		if got := MinFree(tc.floor); got != tc.want {
			t.Errorf("MinFree(%+v) = %q, want %q", tc.floor, got, tc.want)
		}
	}
}
