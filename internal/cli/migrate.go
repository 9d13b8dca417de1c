package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
)

func runMigrate(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("migrate")
	var from, to string
	var perScope bool
	c.fs.StringVar(&from, "from", "", "with --to: move environments from this store (its URL, as for --store)")
	c.fs.StringVar(&to, "to", "", "with --from: the store to move environments into; the source then refuses every write with where they went")
	c.fs.BoolVar(&perScope, "per-scope", false, "move environments (all of them when none is named, and every new one) to the per-scope layout: up to "+
		fmt.Sprint(authority.MaxScopesSplit)+" scopes each; builds of earlier releases cannot read them (docs/deploy.md, upgrading)")
	if err := c.parse(args); err != nil {
		return err
	}
	if perScope {
		if from != "" || to != "" {
			return usageErrorf("--per-scope moves environments within --store; move them between stores (--from, --to) first or after")
		}
		return migratePerScope(ctx, c, c.positional)
	}
	if from == "" && to == "" {
		if err := c.noArguments(); err != nil {
			return err
		}
		return migrateStore(ctx, c)
	}
	if from == "" || to == "" {
		return usageErrorf("moving state needs both --from URL and --to URL (e.g. --from bolt://./latestwins.db --to git+file:///srv/state.git)")
	}
	return moveStores(ctx, c, from, to, c.positional)
}

// prepareStore creates or upgrades st's schema as latestwins migrate --store does.
func prepareStore(ctx context.Context, st authority.Store) error {
	switch s := st.(type) {
	case *bolt.Store:
		return s.Migrate(ctx)
	case *dynamo.Store:
		_, err := s.Migrate(ctx)
		return err
	}
	return nil
}

// moveStores moves envs (all the source holds when none is named) from one store to another
// (authority.Move), one environment at a time, and says what each carried.
func moveStores(ctx context.Context, c *cmdEnv, from, to string, envs []string) error {
	if from == to {
		return usageErrorf("--from and --to name the same store %s: name another one to move into", redactStoreURL(to))
	}
	src, closeSrc, err := openStore(ctx, from, storeMustExist, c.io.Getenv)
	if err != nil {
		return err
	}
	defer closeSrc()
	dst, closeDst, err := openStore(ctx, to, storeCreate, c.io.Getenv)
	if err != nil {
		return err
	}
	defer closeDst()
	if err := prepareStore(ctx, dst); err != nil {
		return fmt.Errorf("prepare the target %s: %w", redactStoreURL(to), err)
	}
	opts, err := c.retention()
	if err != nil {
		return err
	}
	mover := authority.New(src, append(opts, authority.WithLogger(c.log))...)
	if len(envs) == 0 {
		if envs, err = mover.Environments(ctx); err != nil {
			if errors.Is(err, authority.ErrNotListable) {
				return usageErrorf("the store %s cannot list its environments: name the ones to move (latestwins migrate --from URL --to URL ENV...)", redactStoreURL(from))
			}
			return err
		}
	}
	for _, env := range envs {
		if err := authority.ValidateEnvironment(env); err != nil {
			return err
		}
	}
	named := redactStoreURL(to)
	var results []*authority.MoveResult
	for _, env := range envs {
		res, err := mover.Move(ctx, env, named, dst)
		if err != nil {
			return fmt.Errorf("move %s to %s (%d of %d moved before it; run the command again to carry on): %w", env, named, len(results), len(envs), err)
		}
		results = append(results, res)
		if c.s.jsonOut {
			continue
		}
		switch {
		case res.Already:
			c.printf("%s: already moved to %s\n", env, named)
		default:
			c.printf("%s: moved to %s: generation %d, %d scopes, %d events, %d intent ids\n", env, named, res.Generation, res.Scopes, res.Events, res.Intents)
		}
		if res.IntentsLeft {
			c.printf("%s: the source cannot list its records: intent ids accepted before those in its document stayed behind, so a re-delivery of one would be taken as new\n", env)
		}
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"from": redactStoreURL(from), "to": named, "moved": results})
	}
	return nil
}

// redactStoreURL is a store URL without the credentials it may carry, as it may be shown and
// stored in the source's marker.
func redactStoreURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	u, err := url.Parse("x://" + rest)
	if err != nil {
		return scheme + "://(a URL that does not parse)"
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return scheme + strings.TrimPrefix(u.String(), "x")
}

// migratePerScope moves envs (every one the store holds, and every new one, when none is named) to
// the per-scope layout (authority.MoveToScopes), one environment at a time, and says what each
// carried. Run again, it finishes what a stopped run began and leaves the rest as it is.
func migratePerScope(ctx context.Context, c *cmdEnv, envs []string) error {
	all := len(envs) == 0
	// Without names the move sets the layout of new environments too, which a store that holds
	// none yet needs first: it is created, as migrate creates it. Named environments must exist.
	mode := storeMustExist
	if all {
		mode = storeCreate
	}
	st, closeFn, err := openStore(ctx, c.s.store, mode, c.io.Getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	if all {
		if err := prepareStore(ctx, st); err != nil {
			return fmt.Errorf("prepare the store %s: %w", redactStoreURL(c.s.store), err)
		}
	}
	opts, err := c.retention()
	if err != nil {
		return err
	}
	a := authority.New(st, append(opts, authority.WithLogger(c.log))...)
	if all {
		// New environments first, so that none is created in the single document behind the move.
		if err := a.SetPerScopeDefault(ctx); err != nil {
			return err
		}
		if envs, err = a.Environments(ctx); err != nil {
			if errors.Is(err, authority.ErrNotListable) {
				return usageErrorf("the store %s cannot list its environments: name the ones to move (latestwins migrate --per-scope ENV...)", redactStoreURL(c.s.store))
			}
			return err
		}
	}
	for _, env := range envs {
		if err := authority.ValidateEnvironment(env); err != nil {
			return err
		}
	}
	var results []*authority.LayoutMove
	for _, env := range envs {
		res, err := a.MoveToScopes(ctx, env)
		if err != nil {
			return fmt.Errorf("move %s to the per-scope layout (%d of %d moved before it; run the command again to carry on): %w", env, len(results), len(envs), err)
		}
		results = append(results, res)
		if c.s.jsonOut {
			continue
		}
		switch {
		case res.Already:
			c.printf("%s: in the per-scope layout already\n", env)
		case res.Finished:
			c.printf("%s: finished the move a stopped run began: %d scopes, generation %d\n", env, res.Scopes, res.Desired)
		default:
			c.printf("%s: moved to the per-scope layout: %d scopes, generation %d\n", env, res.Scopes, res.Desired)
		}
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"store": redactStoreURL(c.s.store), "new_environments_per_scope": all, "moved": results})
	}
	if all {
		c.printf("new environments use the per-scope layout\n")
	}
	return nil
}
