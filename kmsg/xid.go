package kmsg

import (
	"strconv"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
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

	CheckMechanicals Action = "CHECK_MECHANICALS" // the board's power cabling (Xid 54)
	UpdateSWFW       Action = "UPDATE_SWFW"       // update the driver and firmware (Xid 78)
	CheckUVM         Action = "CHECK_UVM"         // check the unified memory driver, nvidia-uvm (Xid 159)
)

// NoBucket is XidInfo.Bucket for an Xid the catalog lists without a
// resolution bucket.
const NoBucket = "-"

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
	case CheckMechanicals:
		return "check the GPU's power cables"
	case UpdateSWFW:
		return "update the GPU driver and firmware"
	case CheckUVM:
		return "check the nvidia-uvm driver"
	}
	return "see NVIDIA's Xid catalog"
}

// XidInfo is what the catalog says of one Xid.
type XidInfo struct {
	Mnemonic    string // NVIDIA's name, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
	Description string // short, lower case, for a push: "fallen off the bus"
	Action      Action
	// Bucket is the catalog's immediate action where it is not Action
	// itself: a workflow ("WORKFLOW_XID_48"), whose plain case Action
	// holds, or NoBucket. "" means Action is the catalog's bucket.
	Bucket string
}

// xidCatalog holds every Xid of NVIDIA's Xid catalog for Ampere and
// newer GPUs ("Analyzing Xid Errors with the Xid Catalog",
// https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
// with its "Resolution Bucket (Immediate Action)"; testdata/xid-catalog.tsv
// is a copy of that table, and TestXidCatalogMatchesNVIDIA holds this one
// against it. Where the catalog names a workflow instead of a bucket, the
// entry takes the workflow's plain case and keeps the workflow's name in
// Bucket: WORKFLOW_XID_45 follows the Xid logged with it (solo it is an
// application torn down); WORKFLOW_XID_48 solo is a GPU reset;
// WORKFLOW_NVLINK_ERR (74) and WORKFLOW_NVLINK5_ERR (144–150) need "a GPU
// reset or node reboot", and on Blackwell an Xid 154 logged with them
// states which; XID_154 carries its own action (see ActionOf). For Xids
// 162–172 the catalog gives no bucket: the entry takes what its words say
// (163 "No GPU reset required"; 168 "boot re-attempted"; 171 and 172 add
// to an Xid 48, which says what to do), or contact support where they say
// nothing a user can do. Xid 61 is "Unused" on Ampere and newer, so one
// seen comes from an older GPU, whose catalog says to reset it.
var xidCatalog = map[int]XidInfo{
	1:   {"ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	2:   {"ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	3:   {"ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	4:   {"ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "unused on Ampere and newer GPUs", ContactSupport, ""},
	5:   {"ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "unused on Ampere and newer GPUs", ContactSupport, ""},
	6:   {"ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	7:   {"ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	8:   {"ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", RestartApp, ""},
	9:   {"ROBUST_CHANNEL_GR_ERROR_INSTANCE", "unused on Ampere and newer GPUs", ContactSupport, ""},
	10:  {"ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "unused on Ampere and newer GPUs", ContactSupport, ""},
	11:  {"ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "invalid or corrupted push buffer stream", RestartApp, ""},
	12:  {"ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	13:  {"ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception", RestartApp, ""},
	14:  {"ROBUST_CHANNEL_FAKE_ERROR", "fake or injected error from userspace", Ignore, ""},
	15:  {"ROBUST_CHANNEL_SCANLINE_TIMEOUT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	16:  {"ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	17:  {"ROBUST_CHANNEL_PARAMETER_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	18:  {"ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	19:  {"ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "unused on Ampere and newer GPUs", ContactSupport, ""},
	20:  {"ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	21:  {"ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	22:  {"ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "unused on Ampere and newer GPUs", ContactSupport, ""},
	23:  {"ROBUST_CHANNEL_RC_LOGGING_ENABLED", "unused on Ampere and newer GPUs", ContactSupport, ""},
	24:  {"ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	25:  {"ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "invalid or illegal push buffer stream", RestartApp, ""},
	26:  {"ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	27:  {"ROBUST_CHANNEL_VP_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	28:  {"ROBUST_CHANNEL_VP2_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	29:  {"ROBUST_CHANNEL_BSP_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	30:  {"ROBUST_CHANNEL_BAD_ADDR_ACCESS", "unused on Ampere and newer GPUs", ContactSupport, ""},
	31:  {"ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", RestartApp, ""},
	32:  {"ROBUST_CHANNEL_PBDMA_ERROR", "corrupted push buffer stream", RestartApp, ""},
	33:  {"ROBUST_CHANNEL_SEC_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	34:  {"ROBUST_CHANNEL_MSVLD_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	35:  {"ROBUST_CHANNEL_MSPDEC_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	36:  {"ROBUST_CHANNEL_MSPPP_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	37:  {"ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "driver firmware error", Ignore, ""},
	38:  {"ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "driver firmware error", Ignore, ""},
	39:  {"ROBUST_CHANNEL_CE0_ERROR", "copy engine exception", RestartApp, ""},
	40:  {"ROBUST_CHANNEL_CE1_ERROR", "copy engine exception", RestartApp, ""},
	41:  {"ROBUST_CHANNEL_CE2_ERROR", "copy engine exception", RestartApp, ""},
	42:  {"ROBUST_CHANNEL_VIC_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	43:  {"ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (application fault)", Ignore, ""},
	44:  {"ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "graphics engine fault during context switch", Ignore, ""},
	45:  {"ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup (application torn down)", FollowOther, "WORKFLOW_XID_45"},
	46:  {"ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", ResetGPU, ""},
	47:  {"ROBUST_CHANNEL_NVENC0_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	48:  {"ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error", ResetGPU, "WORKFLOW_XID_48"},
	49:  {"SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "unused on Ampere and newer GPUs", ContactSupport, ""},
	50:  {"SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	51:  {"SILENT_RUNNING_STRESS_TEST_FAILURE", "unused on Ampere and newer GPUs", ContactSupport, ""},
	52:  {"SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "unused on Ampere and newer GPUs", ContactSupport, ""},
	53:  {"SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "unused on Ampere and newer GPUs", ContactSupport, ""},
	54:  {"SILENT_RUNNING_PWR_REDUCED_CLOCKING", "auxiliary power not connected to the GPU board", CheckMechanicals, ""},
	55:  {"SILENT_RUNNING_TEMPERATURE_READ_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	56:  {"DISPLAY_CHANNEL_EXCEPTION", "unused on Ampere and newer GPUs", ContactSupport, ""},
	57:  {"FB_LINK_TRAINING_FAILURE_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	58:  {"FB_MEMORY_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	59:  {"PMU_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	60:  {"ROBUST_CHANNEL_SEC2_ERROR", "video processor exception", RestartApp, ""},
	61:  {"PMU_BREAKPOINT", "internal micro-controller breakpoint", ResetGPU, ""},
	62:  {"PMU_HALT_ERROR", "internal micro-controller halt", ResetGPU, ""},
	63:  {"INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory row remapping event", Ignore, ""},
	64:  {"INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory row remapping failure", ResetGPU, ""},
	65:  {"ROBUST_CHANNEL_NVENC1_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	66:  {"ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "illegal access by driver", Ignore, ""},
	67:  {"ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "illegal access by driver", Ignore, ""},
	68:  {"ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", RestartApp, ""},
	69:  {"ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", RestartApp, ""},
	70:  {"ROBUST_CHANNEL_CE3_ERROR", "copy engine error", RestartApp, ""},
	71:  {"ROBUST_CHANNEL_CE4_ERROR", "copy engine error", RestartApp, ""},
	72:  {"ROBUST_CHANNEL_CE5_ERROR", "copy engine error", RestartApp, ""},
	73:  {"ROBUST_CHANNEL_NVENC2_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	74:  {"NVLINK_ERROR", "NVLink error", ResetGPU, "WORKFLOW_NVLINK_ERR"},
	75:  {"ROBUST_CHANNEL_CE6_ERROR", "copy engine error", RestartApp, ""},
	76:  {"ROBUST_CHANNEL_CE7_ERROR", "copy engine error", RestartApp, ""},
	77:  {"ROBUST_CHANNEL_CE8_ERROR", "copy engine error", RestartApp, ""},
	78:  {"VGPU_START_ERROR", "vGPU start error", UpdateSWFW, ""},
	79:  {"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "fallen off the bus", RestartBM, ""},
	80:  {"PBDMA_PUSHBUFFER_CRC_MISMATCH", "corrupted data sent to GPU", RestartApp, ""},
	81:  {"ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	82:  {"ROBUST_CHANNEL_NVJPG0_ERROR", "JPEG decoder error", RestartApp, ""},
	83:  {"ROBUST_CHANNEL_NVDEC1_ERROR", "video decoder error", RestartApp, ""},
	84:  {"ROBUST_CHANNEL_NVDEC2_ERROR", "video decoder error", RestartApp, ""},
	85:  {"ROBUST_CHANNEL_CE9_ERROR", "copy engine error", RestartApp, ""},
	86:  {"ROBUST_CHANNEL_OFA0_ERROR", "optical flow accelerator exception", RestartApp, ""},
	87:  {"NVTELEMETRY_DRIVER_REPORT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	88:  {"ROBUST_CHANNEL_NVDEC3_ERROR", "video decoder error", RestartApp, ""},
	89:  {"ROBUST_CHANNEL_NVDEC4_ERROR", "video decoder error", RestartApp, ""},
	90:  {"LTC_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	91:  {"RESERVED_XID", "unused on Ampere and newer GPUs", ContactSupport, ""},
	92:  {"EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", Ignore, ""},
	93:  {"INFOROM_ERASE_LIMIT_EXCEEDED", "InfoROM wear limit reached", Ignore, ""},
	94:  {"ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory error", RestartApp, ""},
	95:  {"ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error", ResetGPU, ""},
	96:  {"ROBUST_CHANNEL_NVDEC5_ERROR", "video decoder error", RestartApp, ""},
	97:  {"ROBUST_CHANNEL_NVDEC6_ERROR", "video decoder error", RestartApp, ""},
	98:  {"ROBUST_CHANNEL_NVDEC7_ERROR", "video decoder error", RestartApp, ""},
	99:  {"ROBUST_CHANNEL_NVJPG1_ERROR", "JPEG decoder error", RestartApp, ""},
	100: {"ROBUST_CHANNEL_NVJPG2_ERROR", "JPEG decoder error", RestartApp, ""},
	101: {"ROBUST_CHANNEL_NVJPG3_ERROR", "JPEG decoder error", RestartApp, ""},
	102: {"ROBUST_CHANNEL_NVJPG4_ERROR", "JPEG decoder error", RestartApp, ""},
	103: {"ROBUST_CHANNEL_NVJPG5_ERROR", "JPEG decoder error", RestartApp, ""},
	104: {"ROBUST_CHANNEL_NVJPG6_ERROR", "JPEG decoder error", RestartApp, ""},
	105: {"ROBUST_CHANNEL_NVJPG7_ERROR", "JPEG decoder error", RestartApp, ""},
	106: {"SMBPBI_TEST_MESSAGE", "SMBPBI test message", Ignore, ""},
	107: {"SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI test message", Ignore, ""},
	108: {"NVLINK_REMOTE_TRANSLATION_ERROR", "NVLink remote translation error", Ignore, ""},
	109: {"ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", ResetGPU, ""},
	110: {"SEC_FAULT_ERROR", "security fault", ResetGPU, ""},
	111: {"BUNDLE_ERROR_EVENT", "unused on Ampere and newer GPUs", ContactSupport, ""},
	112: {"DISP_SUPERVISOR_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	113: {"DP_LT_FAILURE", "unused on Ampere and newer GPUs", ContactSupport, ""},
	114: {"HEAD_RG_UNDERFLOW", "unused on Ampere and newer GPUs", ContactSupport, ""},
	115: {"CORE_CHANNEL_REGS", "unused on Ampere and newer GPUs", ContactSupport, ""},
	116: {"WINDOW_CHANNEL_REGS", "unused on Ampere and newer GPUs", ContactSupport, ""},
	117: {"CURSOR_CHANNEL_REGS", "unused on Ampere and newer GPUs", ContactSupport, ""},
	118: {"HEAD_REGS", "unused on Ampere and newer GPUs", ContactSupport, ""},
	119: {"GSP_RPC_TIMEOUT", "GSP RPC timeout", ResetGPU, ""},
	120: {"GSP_ERROR", "GSP error", ResetGPU, ""},
	121: {"C2C_ERROR", "corrected C2C link errors", Ignore, ""},
	122: {"SPI_PMU_RPC_READ_FAIL", "unused on Ampere and newer GPUs", ContactSupport, ""},
	123: {"SPI_PMU_RPC_WRITE_FAIL", "unused on Ampere and newer GPUs", ContactSupport, ""},
	124: {"SPI_PMU_RPC_ERASE_FAIL", "unused on Ampere and newer GPUs", ContactSupport, ""},
	125: {"INFOROM_FS_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	126: {"ROBUST_CHANNEL_CE10_ERROR", "copy engine error", RestartApp, ""},
	127: {"ROBUST_CHANNEL_CE11_ERROR", "copy engine error", RestartApp, ""},
	128: {"ROBUST_CHANNEL_CE12_ERROR", "copy engine error", RestartApp, ""},
	129: {"ROBUST_CHANNEL_CE13_ERROR", "copy engine error", RestartApp, ""},
	130: {"ROBUST_CHANNEL_CE14_ERROR", "copy engine error", RestartApp, ""},
	131: {"ROBUST_CHANNEL_CE15_ERROR", "copy engine error", RestartApp, ""},
	132: {"ROBUST_CHANNEL_CE16_ERROR", "copy engine error", RestartApp, ""},
	133: {"ROBUST_CHANNEL_CE17_ERROR", "copy engine error", RestartApp, ""},
	134: {"ROBUST_CHANNEL_CE18_ERROR", "copy engine error", RestartApp, ""},
	135: {"ROBUST_CHANNEL_CE19_ERROR", "copy engine error", RestartApp, ""},
	136: {"ALI_TRAINING_FAIL", "NVLink training failed", ResetGPU, ""},
	137: {"NVLINK_PRIV_ERR", "NVLink privilege error", Ignore, ""},
	138: {"ROBUST_CHANNEL_DLA_ERROR", "unused on Ampere and newer GPUs", ContactSupport, ""},
	139: {"ROBUST_CHANNEL_OFA1_ERROR", "optical flow accelerator error", RestartApp, ""},
	140: {"UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", ResetGPU, ""},
	141: {"ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA fast path error", Ignore, ""},
	142: {"ROBUST_CHANNEL_NVENC3_ERROR", "video encoder error", ContactSupport, ""},
	143: {"GPU_INIT_ERROR", "GPU initialization error", ResetGPU, ""},
	144: {"NVLINK_SAW_ERROR", "NVLink SAW error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	145: {"NVLINK_RLW_ERROR", "NVLink RLW error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	146: {"NVLINK_TLW_ERROR", "NVLink TLW error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	147: {"NVLINK_TREX_ERROR", "NVLink TREX error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	148: {"NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	149: {"NVLINK_NETIR_ERROR", "NVLink NETIR error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	150: {"NVLINK_MSE_ERROR", "NVLink MSE error", ResetGPU, "WORKFLOW_NVLINK5_ERR"},
	151: {"ROBUST_CHANNEL_KEY_ROTATION_ERROR", "key rotation error", RestartVM, ""},
	152: {"ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU error", Ignore, ""},
	153: {"ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout", Ignore, ""},
	154: {"GPU_RECOVERY_ACTION_CHANGED", "recovery action changed", FollowOther, "XID_154"},
	155: {"NVLINK_SW_DEFINED_ERROR", "NVLink link down", ResetGPU, ""},
	156: {"RESOURCE_RETIREMENT_EVENT", "resource retirement event", ResetGPU, ""},
	157: {"RESOURCE_RETIREMENT_FAILURE", "resource retirement failure", Ignore, ""},
	158: {"GPU_FATAL_TIMEOUT", "GPU fatal timeout", ResetGPU, ""},
	159: {"ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI non-data error", CheckUVM, ""},
	160: {"CHANNEL_RETIREMENT_EVENT", "channel retirement event", Ignore, ""},
	161: {"CHANNEL_RETIREMENT_FAILURE", "channel retirement failure", Ignore, ""},
	162: {"PSHC_REENGAGED", "power smoothing circuitry re-engaged", Ignore, NoBucket},
	163: {"PSHC_DISENGAGED", "power smoothing circuitry disengaged", Ignore, NoBucket},
	164: {"PSHC_LOW_LIFETIME", "power smoothing circuitry near end of life", Ignore, NoBucket},
	165: {"PSHC_ZERO_LIFETIME", "power smoothing circuitry lifetime exhausted", ContactSupport, NoBucket},
	166: {"NVLINK_SECURE_CRYPTO_ERR", "NVLink traffic before encryption was set up (confidential computing)", ContactSupport, NoBucket},
	167: {"PCIE_FATAL_TIMEOUT", "PCIe fatal timeout", ContactSupport, NoBucket},
	168: {"REDUCED_GPU_MEMORY_CAPACITY", "reduced GPU memory capacity (errors in the write-protected region)", RestartBM, NoBucket},
	169: {"SEC2_HALT_ERROR", "internal micro-controller halt (SEC2)", ContactSupport, NoBucket},
	170: {"NVLINK_SECURE_OTHER", "NVLink interrupt in confidential computing mode", ContactSupport, NoBucket},
	171: {"UNCORRECTABLE_DRAM_ERROR", "uncorrectable DRAM error (details of an Xid 48)", FollowOther, NoBucket},
	172: {"UNCORRECTABLE_SRAM_ERROR", "uncorrectable SRAM error (details of an Xid 48)", FollowOther, NoBucket},
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
var xid154 = lazyregexp.New(`to 0x([0-9A-Fa-f]+) \(([^)]*)\)`)

// nvlink5Nonfatal is an NVLink5 Xid (144–150) the driver itself calls
// non-fatal: "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 …)".
// The catalog's decode of those Xids gives such errors no action of their
// own (IGNORE, or whatever the Xid 154 logged with them states); the
// "Fatal" ones need the GPU reset.
var nvlink5Nonfatal = lazyregexp.New(`^[A-Z0-9_/]+ Nonfatal `)

// ActionInRecord reports whether ActionOf reads xid's action from the
// record's words, not the catalog alone: Xid 154 states it, and an NVLink5
// Xid (144–150) says whether it is fatal. Whoever words such an Xid without
// its record (a counter of Xids by number) knows no action to give.
func ActionInRecord(xid int) bool { return xid == 154 || xid >= 144 && xid <= 150 }

// ActionOf is the immediate action for the fault: the catalog's for its
// Xid, for Xid 154 the one the record states, and for an NVLink5 Xid the
// driver calls "Nonfatal" none. ok is false for an Xid the
// catalog lacks and for a fault that is no Xid, except a GPU fallen off the
// bus, which is Xid 79's.
func ActionOf(f Fault) (Action, bool) {
	switch {
	case f.Kind == FallenOffBus:
		return xidCatalog[XidFallenOffBus].Action, true
	case f.Kind != Xid:
		return "", false
	case !ActionInRecord(f.Xid):
		// the catalog's, whatever the record says
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
	case nvlink5Nonfatal.MatchString(f.Message): // 144–150
		return Ignore, true
	}
	info, ok := xidCatalog[f.Xid]
	return info.Action, ok
}
