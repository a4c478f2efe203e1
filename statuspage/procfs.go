package statuspage

// ProcfsStatus says whether procfs hides processes from lavender (a /proc
// mounted with hidepid=, as systemd's ProtectProc= mounts it); the page
// says so when it does: a phase whose process lavender cannot see is then
// never reported as died without an end, which silence must not hide.
type ProcfsStatus struct {
	HidesProcesses bool   `json:"hides_processes"`
	Why            string `json:"why,omitempty"` // how it hides them
}
