package deploy

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// addressFamilies are the socket families the unit may name in
// RestrictAddressFamilies=, by their numbers in socket(2).
var addressFamilies = map[string]int{"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17}

// familiesEnv carries the allowed families to TestRunUnderAddressFamilies.
const familiesEnv = "DEPLOY_ADDRESS_FAMILIES"

// TestServeStartsUnderTheUnitsAddressFamilies runs the real binary as
// serve with the unit's flags and default --web.write-allow=host, under a
// seccomp filter that refuses socket(2) for every family the unit's
// RestrictAddressFamilies= leaves out, as systemd does: serve must come
// up. Listing the host's own addresses (for --web.write-allow=host) takes
// a netlink socket.
func TestServeStartsUnderTheUnitsAddressFamilies(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the seccomp filter here is written for linux/amd64 and arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	var families []string
	for line := range strings.Lines(string(readFile(t, "deploy", "systemd", "lavender.service"))) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "RestrictAddressFamilies="); ok {
			families = append(families, strings.Fields(v)...)
		}
	}
	if len(families) == 0 {
		t.Fatal("lavender.service has no RestrictAddressFamilies=")
	}
	var numbers []string
	for _, f := range families {
		n, ok := addressFamilies[f]
		if !ok {
			t.Fatalf("RestrictAddressFamilies= names %s, which this test does not know", f)
		}
		numbers = append(numbers, strconv.Itoa(n))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.StartProgram(t, testkit.Options{Env: []string{familiesEnv + "=" + strings.Join(numbers, ",")}}, self,
		"-test.run=^TestRunUnderAddressFamilies$", "-test.count=1", "--",
		testkit.Binary(t), "serve", "--watchdog.interval=0", "--web.listen-address=127.0.0.1:0",
		"--runlog.dir="+filepath.Join(t.TempDir(), "logs"), "--bark.config-dir="+t.TempDir(), "--path.kmsg=")
	base := c.URL(t) // fails, with serve's output, if it never comes up
	testkit.WaitFor(t, 20*time.Second, func() bool {
		code, _, err := testkit.Do(nil, "GET", base+"/-/ready", nil, "", "")
		return err == nil && code == 200
	}, "serve ready")
}

// TestRunUnderAddressFamilies is run by the test above: it refuses
// socket(2) for every family but those in its environment, then becomes
// the program its arguments name.
func TestRunUnderAddressFamilies(t *testing.T) {
	allowed := os.Getenv(familiesEnv)
	if allowed == "" || len(flag.Args()) == 0 {
		t.Skip("run by TestServeStartsUnderTheUnitsAddressFamilies")
	}
	var families []uint32
	for _, f := range strings.Split(allowed, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		families = append(families, uint32(n))
	}
	runtime.LockOSThread() // the filter holds for this thread, which execs
	if err := refuseSocketFamilies(families); err != nil {
		t.Fatal(err)
	}
	t.Fatal(syscall.Exec(flag.Args()[0], flag.Args(), os.Environ()))
}

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	len    uint16
	filter *sockFilter
}

// refuseSocketFamilies installs a seccomp filter on this thread that fails
// socket(2) with EAFNOSUPPORT for any family but allowed, as systemd's
// RestrictAddressFamilies= does.
func refuseSocketFamilies(allowed []uint32) error {
	const (
		ldAbsW     = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jeqK       = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		retK       = 0x06 // BPF_RET|BPF_K
		retAllow   = 0x7fff0000
		retErrno   = 0x00050000
		offNr      = 0  // seccomp_data.nr
		offArg0    = 16 // seccomp_data.args[0], its low half on little-endian
		prNoNewPrv = 38
		setFilter  = 1 // SECCOMP_SET_MODE_FILTER
	)
	k := len(allowed)
	prog := []sockFilter{
		{code: ldAbsW, k: offNr},
		{code: jeqK, jt: 0, jf: uint8(k + 2), k: uint32(syscall.SYS_SOCKET)},
		{code: ldAbsW, k: offArg0},
	}
	for i, f := range allowed {
		prog = append(prog, sockFilter{code: jeqK, jt: uint8(k - i), k: f})
	}
	prog = append(prog,
		sockFilter{code: retK, k: retErrno | uint32(syscall.EAFNOSUPPORT)},
		sockFilter{code: retK, k: retAllow})
	fprog := sockFprog{len: uint16(len(prog)), filter: &prog[0]}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prNoNewPrv, 1, 0, 0, 0, 0); e != 0 {
		return e
	}
	sysSeccomp := map[string]uintptr{"amd64": 317, "arm64": 277}[runtime.GOARCH]
	if _, _, e := syscall.RawSyscall(sysSeccomp, setFilter, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	return nil
}
