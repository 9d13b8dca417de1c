package pass

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Old behaviours the process tests rebuild, in a binary built with the latestwins_mutants tag and
// told which at link time (mutant_on.go); a release, built without the tag, carries none.
const (
	mutantDirect      = "direct"      // the command started directly, without a parent-death signal
	mutantPdeathsig   = "pdeathsig"   // started directly with a parent-death signal: its children outlive a killed supervisor
	mutantNoSubreaper = "nosubreaper" // the guard kills its process group only, not descendants that left it
	mutantOldStop     = "oldstop"     // the deadline counted from the supervisor's start; SIGKILL a full, uncapped grace after SIGTERM
	// The guard kills what the command left behind as soon as its leader exits, even while the
	// command is being stopped: a wrapper (sh -c) that ends on SIGTERM takes its children's grace.
	mutantLeaderEndsGrace = "leaderendsgrace"
	// The supervisor's SIGKILL goes to the command's process group only, not to the guard: a
	// descendant that left the group outlives the deadline while the guard waits for it.
	mutantKillGroupOnly = "killgrouponly"
)

// killNowSignal is the supervisor's SIGKILL as the guard gets it: kill every process of the command
// now (see runGuard).
const killNowSignal = syscall.SIGUSR2

// waitDelay bounds how long Run waits for the command's output once its processes are gone: a
// descendant that left the process group may still hold the pipes.
const waitDelay = time.Second

// group is a command's process group, led by the command.
type group struct {
	mu   sync.Mutex
	pgid int
	// guard is the pid of the guard that started the command (0: started directly). Signals go
	// through it, so that it knows when the command is being stopped (see runGuard).
	guard int
	gone  bool // the leader (or its guard) was reaped: its number may be another process's now
}

var _ child = (*group)(nil)

// signal sends sig to the command. Through a guard, SIGKILL goes at once to the command's group
// and, as killNowSignal, to the guard, which kills the command's descendants that left the group;
// any other signal goes to the guard, which passes it on to the group.
func (g *group) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.gone:
		return nil
	case g.guard == 0:
		return syscall.Kill(-g.pgid, sig)
	case sig != syscall.SIGKILL:
		return syscall.Kill(g.guard, sig)
	}
	err := syscall.Kill(-g.pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil // nothing left in the group: the guard still has to hear of the kill
	}
	if mutant == mutantKillGroupOnly {
		return err
	}
	return errors.Join(err, syscall.Kill(g.guard, killNowSignal))
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
