// Command latestwins is the Action's verbs, the operators' commands and the demo in one binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latestwins/latestwins/internal/cli"
	"github.com/latestwins/latestwins/internal/pass"
)

func main() {
	pass.MaybeGuard() // first: in a guard process started by `run`, this is all there is
	os.Exit(realMain())
}

func realMain() int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			cancel(&cli.SignalCause{Signal: s})
		}
	}()
	return cli.Main(ctx, os.Args[1:], cli.OSIO())
}
