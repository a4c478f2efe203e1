package statuspage

// KernelLogStatus says whether lavender reads the kernel log; the page
// says so when it does not, and why: GPU and storage faults are then
// unseen and OOM victims unnamed, which silence must not hide.
type KernelLogStatus struct {
	Readable bool   `json:"readable"`
	Why      string `json:"why,omitempty"` // why not readable
}
