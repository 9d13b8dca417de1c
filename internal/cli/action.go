package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/sethvargo/go-githubactions"

	"github.com/latestwins/latestwins/internal/action"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/gitref"
)

// runAction is the GitHub Action's entry point (action.yml runs it): it reads INPUT_* and GITHUB_*
// variables, not flags.
func runAction(ctx context.Context, c *cmdEnv, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(c.io.Stdout, "latestwins action: the GitHub Action's step. It reads the step's inputs from INPUT_* variables and")
		fmt.Fprintln(c.io.Stdout, "the run from GITHUB_* variables; see action.yml and docs/action.md.")
		return nil
	}
	if len(args) > 0 {
		return usageErrorf("action takes no arguments: it reads the step's inputs from INPUT_* variables (see action.yml)")
	}
	a := githubactions.New(githubactions.WithGetenv(c.io.Getenv), githubactions.WithWriter(c.io.Stdout))
	err := action.Run(ctx, a, action.Deps{OpenStore: openStoreInput(storeEnv(c.io.Getenv, a)), Stdin: c.io.Stdin, Stdout: c.io.Stdout, Stderr: c.io.Stderr, Log: c.log})
	return actionExit(err)
}

// storeEnv is the environment the Action's store sees: the job's, where a github:// store's
// GITHUB_TOKEN, unless the job sets one, is the github-token input (the workflow's token by
// default), so that the state in the workflow's own repository needs nothing but
// permissions: contents: write.
func storeEnv(getenv func(string) string, a *githubactions.Action) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" || k != gitref.GitHubTokenVar {
			return v
		}
		return a.GetInput("github-token")
	}
}

// openStoreInput opens the store input; a malformed URL is bad input for the Action.
func openStoreInput(getenv func(string) string) action.OpenStoreFunc {
	return func(ctx context.Context, raw string) (authority.Store, func() error, error) {
		st, closeFn, err := OpenStore(ctx, raw, getenv)
		if errors.Is(err, errUsage) {
			return nil, nil, &authority.InputError{Field: "store", Value: raw, Fix: err.Error()}
		}
		return st, closeFn, err
	}
}

// actionExit maps the Action's outcomes onto the documented exit codes; annotations already said why.
func actionExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, action.ErrRetry):
		return &exitError{code: ExitRetry, msg: err.Error()}
	case errors.Is(err, action.ErrFailed):
		return &exitError{code: ExitFailed, msg: err.Error()}
	case errors.Is(err, action.ErrInterrupted):
		return &exitError{code: ExitInterrupted, msg: err.Error()}
	}
	return err
}
