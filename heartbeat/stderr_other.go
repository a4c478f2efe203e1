//go:build !linux

package heartbeat

import (
	"errors"
	"io"
	"os"
)

// stderrPipe is a pipe: elsewhere than on Linux the command's stderr is
// never a terminal under the wrapper.
func stderrPipe(io.Writer) (r, w *os.File, err error) { return os.Pipe() }

// startRelay has no relay to start here: handOff passes stderr on in this
// process, while it lasts.
func startRelay(r, out *os.File) (int, error) {
	return 0, errors.ErrUnsupported
}
