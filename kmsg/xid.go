package kmsg

import (
	"regexp"
	"strconv"
)

// XidFallenOffBus is the Xid of a GPU that stopped answering on PCIe.
const XidFallenOffBus = 79

// Action is NVIDIA's "Resolution Bucket (Immediate Action)" for an Xid:
// what gets the GPU back into service.
type Action string

const (
	RestartApp     Action = "RESTART_APP"     // restart the application; the GPU is fine
	ResetGPU       Action = "RESET_GPU"       // reset the GPU (nvidia-smi -r) before new work
	RestartBM      Action = "RESTART_BM"      // restart the machine ("bare metal")
	RestartVM      Action = "RESTART_VM"      // restart the VM that owns the GPU
	DrainAndReset  Action = "DRAIN_AND_RESET" // let running work end, then reset the GPU
	DrainP2P       Action = "DRAIN_P2P"       // let peer-to-peer work end
	ContactSupport Action = "CONTACT_SUPPORT" // nothing a user can do alone
	Ignore         Action = "IGNORE"          // no action needed
	FollowOther    Action = "FOLLOW_OTHER"    // follow the Xid logged with it (45 next to another, 154)
)

// Advice is the action in words, for a push: what the person with the phone
// does next.
func (a Action) Advice() string {
	switch a {
	case RestartApp:
		return "restart the training"
	case ResetGPU:
		return "reset the GPU (nvidia-smi -r)"
	case RestartBM:
		return "reboot the host"
	case RestartVM:
		return "restart the VM"
	case DrainAndReset:
		return "drain the GPU, then reset it"
	case DrainP2P:
		return "drain its peer-to-peer work"
	case ContactSupport:
		return "contact support"
	case Ignore:
		return "no action needed"
	case FollowOther:
		return "follow the Xid logged with it"
	}
	return "see NVIDIA's Xid catalog"
}

// XidInfo is what the catalog says of one Xid.
type XidInfo struct {
	Mnemonic    string // NVIDIA's name, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
	Description string // short, lower case, for a push: "fallen off the bus"
	Action      Action
}

// xidCatalog holds the Xids that matter to training runs, with the
// "Resolution Bucket (Immediate Action)" of NVIDIA's Xid catalog for
// Ampere and newer GPUs ("Analyzing Xid Errors with the Xid Catalog",
// https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
// Where the catalog names a workflow instead of a bucket, the entry takes
// the workflow's plain case: 45 follows the Xid logged with it (solo it is
// an application torn down); 48 solo is RESET_GPU; 74 needs "a GPU reset
// or node reboot"; 154 carries its own action (see Parse154). Xid 61 is
// "Unused" on Ampere and newer; older GPUs logged it as a micro-controller
// breakpoint, for which the catalog for older GPUs says reset.
var xidCatalog = map[int]XidInfo{
	8:   {"ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", RestartApp},
	13:  {"ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception", RestartApp},
	31:  {"ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", RestartApp},
	32:  {"ROBUST_CHANNEL_PBDMA_ERROR", "corrupted push buffer stream", RestartApp},
	43:  {"ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (application fault)", Ignore},
	45:  {"ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup (application torn down)", FollowOther},
	46:  {"ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", ResetGPU},
	48:  {"ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error", ResetGPU},
	61:  {"PMU_BREAKPOINT", "internal micro-controller breakpoint", ResetGPU},
	62:  {"PMU_HALT_ERROR", "internal micro-controller halt", ResetGPU},
	63:  {"INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory row remapping event", Ignore},
	64:  {"INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory row remapping failure", ResetGPU},
	68:  {"ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", RestartApp},
	69:  {"ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", RestartApp},
	74:  {"NVLINK_ERROR", "NVLink error", ResetGPU},
	79:  {"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "fallen off the bus", RestartBM},
	92:  {"EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", Ignore},
	94:  {"ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory error", RestartApp},
	95:  {"ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error", ResetGPU},
	109: {"ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", ResetGPU},
	119: {"GSP_RPC_TIMEOUT", "GSP RPC timeout", ResetGPU},
	120: {"GSP_ERROR", "GSP error", ResetGPU},
	140: {"UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", ResetGPU},
	143: {"GPU_INIT_ERROR", "GPU initialization error", ResetGPU},
	154: {"GPU_RECOVERY_ACTION_CHANGED", "recovery action changed", FollowOther},
	155: {"NVLINK_SW_DEFINED_ERROR", "NVLink link down", ResetGPU},
	156: {"RESOURCE_RETIREMENT_EVENT", "resource retirement event", ResetGPU},
	158: {"GPU_FATAL_TIMEOUT", "GPU fatal timeout", ResetGPU},
}

// LookupXid returns the catalog's entry for xid; ok is false for an Xid the
// catalog lacks.
func LookupXid(xid int) (XidInfo, bool) {
	info, ok := xidCatalog[xid]
	return info, ok
}

// CatalogXids lists the Xids the catalog knows, for tests and docs.
func CatalogXids() []int {
	out := make([]int, 0, len(xidCatalog))
	for x := range xidCatalog {
		out = append(out, x)
	}
	return out
}

// xid154 reads the action an Xid 154 states: "GPU recovery action changed
// from 0x0 (None) to 0x2 (Node Reboot Required)".
var xid154 = regexp.MustCompile(`to 0x([0-9A-Fa-f]+) \(([^)]*)\)`)

// ActionOf is the immediate action for the fault: the catalog's for its
// Xid, or for Xid 154 the one the record states. ok is false for an Xid the
// catalog lacks and for a fault that is no Xid, except a GPU fallen off the
// bus, which is Xid 79's.
func ActionOf(f Fault) (Action, bool) {
	switch {
	case f.Kind == FallenOffBus:
		return xidCatalog[XidFallenOffBus].Action, true
	case f.Kind != Xid:
		return "", false
	case f.Xid == 154:
		if m := xid154.FindStringSubmatch(f.Message); m != nil {
			code, _ := strconv.ParseUint(m[1], 16, 8)
			switch code {
			case 0:
				return Ignore, true
			case 1:
				return ResetGPU, true
			case 2:
				return RestartBM, true
			case 3:
				return DrainP2P, true
			case 4:
				return DrainAndReset, true
			}
		}
	}
	info, ok := xidCatalog[f.Xid]
	return info.Action, ok
}
