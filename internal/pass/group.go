package pass

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// mutant rebuilds an old behaviour so that the process tests can show they catch it. Only those
// tests set it, at link time (-ldflags -X); a release never does.
var mutant string

// Old behaviours the process tests rebuild.
const (
	mutantDirect      = "direct"      // the command started directly, without a parent-death signal
	mutantPdeathsig   = "pdeathsig"   // started directly with a parent-death signal: its children outlive a killed supervisor
	mutantNoSubreaper = "nosubreaper" // the guard kills its process group only, not descendants that left it
	mutantOldStop     = "oldstop"     // the deadline counted from the supervisor's start; SIGKILL a full, uncapped grace after SIGTERM
)

// waitDelay bounds how long Run waits for the command's output once its processes are gone: a
// descendant that left the process group may still hold the pipes.
const waitDelay = time.Second

// group is a command's process group, led by the command.
type group struct {
	mu   sync.Mutex
	pgid int
	gone bool // the leader was reaped: its number may be another process's now
}

var _ child = (*group)(nil)

func (g *group) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return nil
	}
	return syscall.Kill(-g.pgid, sig)
}

// killAndForget kills whatever is left in the group, and stops signalling it from then on.
func (g *group) killAndForget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.gone {
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		g.gone = true
	}
}

// forget stops signalling the group.
func (g *group) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gone = true
}

// waitResult is how the command ended, from exec.Cmd.Wait: a command that exited with status 0
// succeeded even when a stray descendant kept its output open past waitDelay.
func waitResult(err error) error {
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return err
}

// newCmd prepares argv (argv[0] looked up in PATH) with the command's environment and files.
func newCmd(argv []string, c command) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	cmd.WaitDelay = waitDelay
	return cmd
}
