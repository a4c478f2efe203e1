package kmsg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// flood is n records as a failing host writes them: an Xid storm on one GPU
// mixed with I/O errors and ordinary driver chatter.
func flood(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n", i, i)
		case 1:
			fmt.Fprintf(&b, "3,%d,%d,-;I/O error, dev nvme1n1, sector %d op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0\n", i, i, i)
		case 2:
			fmt.Fprintf(&b, "6,%d,%d,-;nvme nvme0: 8/0/0 default/read/poll queues\n", i, i)
		default:
			fmt.Fprintf(&b, "4,%d,%d,-;NVRM: Xid (PCI:0000:86:00 GPU-I:02): 94, pid=4242, name=python3, Contained ECC error.\n", i, i)
		}
	}
	return b.Bytes()
}

// BenchmarkFlood reads a flood of 100,000 records through a real FIFO and
// poll(2), the way serve reads a FIFO given as --path.kmsg, and reports
// records per second, handler calls (batches) per flood, and the heap in
// use at the end per record read.
func BenchmarkFlood(b *testing.B) {
	const records = 100_000
	data := flood(records)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var batches, faults int
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "kmsg.fifo")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			b.Skipf("no FIFO: %v", err)
		}
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			w, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.Write(data)
			w.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		batches, faults = 0, 0
		want := records * 3 / 4
		done := make(chan struct{})
		go func() {
			r.Run(ctx, func(fs []Fault) {
				batches++
				faults += len(fs)
				if faults >= want {
					select {
					case <-done:
					default:
						close(done)
					}
				}
			})
		}()
		select {
		case <-done:
		case <-ctx.Done():
			b.Fatalf("flood not read: %d faults of %d", faults, want)
		}
		cancel()
		r.Close()
		if st := r.Stats(); st.Records != records {
			b.Fatalf("read %d records of %d", st.Records, records)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(batches), "batches/flood")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
}

// BenchmarkParse is the parser alone, per record of the same flood.
func BenchmarkParse(b *testing.B) {
	lines := bytes.Split(flood(1000), []byte{'\n'})
	b.ReportAllocs()
	var p Parser
	for i := 0; b.Loop(); i++ {
		if rec, ok := ParseRecord(lines[i%1000]); ok {
			p.Parse(rec)
		}
	}
}
