package kmsg

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// catalogRow is one row of testdata/xid-catalog.tsv, a copy of NVIDIA's
// Xid catalog (its source is in the file's header).
type catalogRow struct {
	xid      int
	mnemonic string
	bucket   string // the "Resolution Bucket (Immediate Action)", NoBucket for none
}

func readCatalog(t *testing.T) []catalogRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "xid-catalog.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []catalogRow
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) < 3 {
			t.Fatalf("xid-catalog.tsv:%d: %d fields, want xid, mnemonic, action[, note]", line, len(fields))
		}
		xid, err := strconv.Atoi(fields[0])
		if err != nil {
			t.Fatalf("xid-catalog.tsv:%d: %v", line, err)
		}
		rows = append(rows, catalogRow{xid: xid, mnemonic: fields[1], bucket: fields[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// workflowAction is what each of the catalog's workflows amounts to
// without the decoding it asks for (see xidCatalog).
var workflowAction = map[string]Action{
	"WORKFLOW_XID_45":      FollowOther,
	"WORKFLOW_XID_48":      ResetGPU,
	"WORKFLOW_NVLINK_ERR":  ResetGPU,
	"WORKFLOW_NVLINK5_ERR": ResetGPU,
	"XID_154":              FollowOther,
}

// olderGPUAction lists the Xids whose action deliberately differs from
// the catalog for Ampere and newer, and why.
var olderGPUAction = map[int]string{
	61: "unused on Ampere and newer: one logged comes from an older GPU, whose catalog says to reset it",
}

// TestXidCatalogMatchesNVIDIA holds kmsg's catalog against NVIDIA's table:
// every Xid NVIDIA lists is known, under NVIDIA's mnemonic, with NVIDIA's
// immediate action, or for a workflow with its plain case; and kmsg knows
// no Xid that NVIDIA does not list.
func TestXidCatalogMatchesNVIDIA(t *testing.T) {
	rows := readCatalog(t)
	if len(rows) < 170 {
		t.Fatalf("testdata/xid-catalog.tsv holds %d rows; NVIDIA's catalog has 172", len(rows))
	}
	listed := map[int]bool{}
	for _, row := range rows {
		listed[row.xid] = true
		info, ok := LookupXid(row.xid)
		if !ok {
			t.Errorf("Xid %d (%s, %s) is not in kmsg's catalog", row.xid, row.mnemonic, row.bucket)
			continue
		}
		if info.Mnemonic != row.mnemonic {
			t.Errorf("Xid %d: mnemonic %s, NVIDIA's is %s", row.xid, info.Mnemonic, row.mnemonic)
		}
		if info.Description == "" {
			t.Errorf("Xid %d: no description for the push", row.xid)
		}
		if _, older := olderGPUAction[row.xid]; older {
			continue
		}
		bucket := info.Bucket
		if bucket == "" {
			bucket = string(info.Action)
		}
		if bucket != row.bucket {
			t.Errorf("Xid %d: bucket %s, NVIDIA's is %s", row.xid, bucket, row.bucket)
		}
		if want, ok := workflowAction[row.bucket]; ok && info.Action != want {
			t.Errorf("Xid %d: %s taken as %s, want %s", row.xid, row.bucket, info.Action, want)
		}
		if info.Action.Advice() == "see NVIDIA's Xid catalog" {
			t.Errorf("Xid %d: action %q has no advice for the push", row.xid, info.Action)
		}
	}
	for _, xid := range CatalogXids() {
		if !listed[xid] {
			t.Errorf("kmsg's catalog has Xid %d, which NVIDIA's does not list", xid)
		}
	}
}

// TestNVIDIAsIgnoredXids: the Xids NVIDIA says need no action push "no
// action needed", and the NVLink5 Xids the driver calls non-fatal too;
// the fatal ones say to reset the GPU.
func TestNVIDIAsIgnoredXids(t *testing.T) {
	for _, tc := range []struct {
		xid     int
		message string
		want    Action
	}{
		{14, "", Ignore},
		{44, "", Ignore},
		{144, "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)", Ignore},
		{144, "SAW_MVB Fatal XC0 i0 Link 0 (0x00000001 0x00000002 0x00000000 0x00000000 0x00000000 0x00000000)", ResetGPU},
		{149, "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)", ResetGPU},
		{150, "", ResetGPU},
		{13, "Nonfatal XC0", RestartApp},
	} {
		got, ok := ActionOf(Fault{Kind: Xid, Xid: tc.xid, Message: tc.message})
		if !ok || got != tc.want {
			t.Errorf("Xid %d %q: %s, %v; want %s", tc.xid, tc.message, got, ok, tc.want)
		}
	}
}

// TestActionInRecordIsWhereTheRecordDecides: ActionInRecord names exactly
// the Xids whose action ActionOf reads off the driver's words, so that a
// text worded without the record (from a counter of Xids) can say it has no
// action to give for those, and only those.
func TestActionInRecordIsWhereTheRecordDecides(t *testing.T) {
	messages := []string{
		"",
		"GPU recovery action changed from 0x0 (None) to 0x0 (None)",
		"GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
		"GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
		"GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
		"SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
		"NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
	}
	xids := append(CatalogXids(), 0, 173, 999)
	for _, xid := range xids {
		actions := map[Action]bool{}
		for _, m := range messages {
			a, _ := ActionOf(Fault{Kind: Xid, Xid: xid, Message: m})
			actions[a] = true
		}
		if decides := len(actions) > 1; decides != ActionInRecord(xid) {
			t.Errorf("Xid %d: the record decides its action: %v (actions %v); ActionInRecord says %v", xid, decides, actions, ActionInRecord(xid))
		}
	}
}
