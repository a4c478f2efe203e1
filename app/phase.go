package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lavender-ml/lavender/heartbeat"
	"github.com/lavender-ml/lavender/phaseapi"
)

// PhaseEvent sends one heartbeat, `lavender phase start`, `ping` or `end`,
// through a client of cfg. A warning in the answer (an end taken without
// its contradictory --step and --total) is printed on stderr, not an
// error: the exporter recorded the event, and the exit code says so.
func PhaseEvent(ctx context.Context, cfg heartbeat.ClientConfig, req phaseapi.HeartbeatRequest, stderr io.Writer) error {
	c, err := cfg.Open()
	if err != nil {
		return err
	}
	warning, err := c.Event(ctx, req)
	if warning != "" {
		fmt.Fprintln(stderr, "lavender: warning:", warning)
	}
	return err
}

// PhaseRunOptions are `lavender phase run`'s.
type PhaseRunOptions struct {
	Client heartbeat.ClientConfig
	Phase  string
	Every  time.Duration // between pings
	// Command is the command and its arguments, after a "--" that is
	// dropped if it leads.
	Command []string
}

// RunPhase runs o.Command as the phase o.Phase: start, a ping every
// o.Every, end ok or failed by its exit code, which it returns. A usage
// error (no command, a bad interval, URL or name) returns 2 and the error.
// The terminal, tty if not nil, goes to the command while it runs.
func RunPhase(ctx context.Context, o PhaseRunOptions, env Env, stdin io.Reader, stdout, stderr io.Writer, tty *os.File) (int, error) {
	if o.Every <= 0 {
		return 2, fmt.Errorf("--every must be positive, not %s", o.Every)
	}
	command := o.Command
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if len(command) == 0 {
		return 2, errors.New("phase run: no command given; usage: lavender phase run NAME -- CMD [ARGS...]")
	}
	client, err := o.Client.Open()
	if err != nil {
		return 2, err
	}
	w := &heartbeat.Wrapper{
		Client: client,
		Phase:  o.Phase,
		Every:  o.Every,
		Stdin:  stdin,
		Stdout: stdout,
		Stderr: stderr,
		Logger: env.Logger,
		// The terminal, if any, goes to the command while it runs.
		Terminal: tty,
	}
	return w.Run(ctx, command[0], command[1:]...)
}
