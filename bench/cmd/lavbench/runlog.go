package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/runlog"
)

// benchEntry is a realistic BARK line, long enough to be clipped to 80 bytes.
const benchEntry = "BARK swap 54% sent ok=1 fail=0 phone.bark.env:1 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

func runRunlog(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("runlog", flag.ContinueOnError)
	seconds := fs.Int("seconds", 5, "duration of each run")
	writersFlag := fs.String("writers", "1,2", "writer processes, comma-separated settings")
	lavender := fs.String("lavender", "", "lavender binary: also time `lavender runlog append` invocations")
	cliCount := fs.Int("cli-count", 200, "number of `lavender runlog append` invocations")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seconds < 1 || *seconds > 120 || *cliCount < 0 || *cliCount > 10000 {
		return fmt.Errorf("seconds 1-120, cli-count 0-10000")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("## Run log: appends per second at the default 1024-byte cap (compaction every few appends)\n\n")
	fmt.Println("| writer processes | appends | appends/s (all writers) | per writer | file after | well-formed |")
	fmt.Println("|---|---|---|---|---|---|")
	for i, w := range strings.Split(*writersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("bad -writers %q", *writersFlag)
		}
		opts := runlog.Options{Dir: filepath.Join(dir, strconv.Itoa(i))}
		l, err := runlog.Start(opts, "device=cuda lavender=bench", runlog.RunStart)
		if err != nil {
			return err
		}
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for range n {
			cmd := exec.CommandContext(ctx, self, "runlog-writer", "-dir", opts.Dir, "-seconds", strconv.Itoa(*seconds))
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, os.Stderr
			if err := cmd.Start(); err != nil {
				return err
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		total := 0
		var per []string
		for j, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("writer: %w", err)
			}
			c, err := strconv.Atoi(strings.TrimSpace(outs[j].String()))
			if err != nil {
				return fmt.Errorf("writer output %q", outs[j].String())
			}
			total += c
			per = append(per, fmt.Sprintf("%.0f", float64(c)/float64(*seconds)))
		}
		data, err := l.Read()
		if err != nil {
			return err
		}
		_, perr := runlog.Parse(data)
		ok := "yes"
		if perr != nil || len(data) > runlog.DefaultMaxBytes {
			ok = fmt.Sprintf("NO: %v, %d bytes", perr, len(data))
		}
		fmt.Printf("| %d | %d | **%.0f** | %s | %d bytes | %s |\n", n, total, float64(total)/float64(*seconds),
			strings.Join(per, " + "), len(data), ok)
	}
	if *lavender != "" && *cliCount > 0 {
		opts := runlog.Options{Dir: filepath.Join(dir, "cli")}
		t0 := time.Now()
		for i := range *cliCount {
			cmd := exec.CommandContext(ctx, *lavender, "runlog", "append", "--runlog.dir="+opts.Dir, "BARK", "entry", strconv.Itoa(i))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("lavender runlog append: %v\n%s", err, out)
			}
		}
		el := time.Since(t0)
		fmt.Printf("\n`lavender runlog append` (a new process each, as a shell script would call it): %d invocations in %s, "+
			"%.0f/s, %.1f ms each\n", *cliCount, el.Round(time.Millisecond), float64(*cliCount)/el.Seconds(),
			float64(el.Milliseconds())/float64(*cliCount))
	}
	fmt.Println()
	return nil
}

// runRunlogWriter appends to the current run in -dir for -seconds (at most
// 10 million times) and prints how many appends it made.
func runRunlogWriter(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("runlog-writer", flag.ContinueOnError)
	dir := fs.String("dir", "", "run-log directory")
	seconds := fs.Int("seconds", 5, "duration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := runlog.Current(runlog.Options{Dir: *dir})
	if err != nil {
		return err
	}
	end := time.Now().Add(time.Duration(*seconds) * time.Second)
	n := 0
	for ; n < 10_000_000 && time.Now().Before(end) && ctx.Err() == nil; n++ {
		if err := l.Append(benchEntry); err != nil {
			return err
		}
	}
	fmt.Println(n)
	return nil
}
