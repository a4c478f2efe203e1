package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// NormalizeBusID writes a GPU's PCI address in the kernel log's form,
// "0000:3b:00": domain (at least four hex digits), bus and device, lower
// case, without the function. kmsg names a GPU so in its Xid records
// (kmsg.Fault.GPU, where the driver prints "PCI:0000:3b:00"), while NVML's
// busId is "00000000:3B:00.0" (eight-digit domain, upper case, function)
// and sysfs says "0000:3b:00.0"; one form lets a caller match an NVML
// device or event to the kernel log's record of the same GPU with ==.
// The function is dropped because the driver's Xid lines omit it and the
// GPU is function 0 of its device (others, such as its audio, are not
// GPUs). ok is false for text that is no PCI address.
func NormalizeBusID(s string) (id string, ok bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "PCI:")
	s = strings.TrimPrefix(s, "pci:")
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if _, err := strconv.ParseUint(s[i+1:], 16, 8); err != nil {
			return "", false
		}
		s = s[:i]
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", false
	}
	var n [3]uint64
	for i, p := range parts {
		bits := 8
		if i == 0 {
			bits = 32
		}
		if p == "" || len(p) > bits/4 {
			return "", false
		}
		v, err := strconv.ParseUint(p, 16, bits)
		if err != nil {
			return "", false
		}
		n[i] = v
	}
	if n[2] > 0x1f { // a PCI device number has five bits
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x", n[0], n[1], n[2]), true
}

// cString reads a NUL-terminated C char array as NVML fills them.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
