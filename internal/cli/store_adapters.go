package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/gitref"
)

// openBolt opens the embedded store. A path that can never work (its directory missing, a
// directory, a file this process may not open as it needs) and a store that must exist but does
// not are bad configuration; a damaged file is an error of its own (bolt.ErrDamaged).
func openBolt(_ context.Context, path string, mode storeMode) (authority.Store, func() error, error) {
	if path == "" {
		return nil, nil, usageErrorf("store bolt://: give a file path, e.g. bolt://./latestwins.db")
	}
	var opts []bolt.Option
	switch mode {
	case storeMustExist:
		opts = append(opts, bolt.WithMustExist())
	case storeReadOnly:
		opts = append(opts, bolt.WithReadOnly())
	}
	st, err := bolt.Open(path, opts...)
	switch {
	case err == nil:
		return st, st.Close, nil
	case errors.Is(err, bolt.ErrNoStore):
		return nil, nil, usageCause(err, "no store at bolt://%s: nothing was ever recorded there; check the path, or pass --store (or set LATESTWINS_STORE) to name the store that holds your environments, "+
			"e.g. --store bolt://PATH or --store dynamodb://TABLE?region=R", path)
	case errors.Is(err, bolt.ErrUnusable):
		return nil, nil, usageErrorf("store bolt://%s cannot be used: %w", path, err)
	}
	return nil, nil, fmt.Errorf("open store bolt://%s: %w", path, err)
}

func openDynamo(ctx context.Context, raw string) (authority.Store, func() error, error) {
	st, err := dynamo.Open(ctx, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return st, noClose, nil
}

// openGit opens a store on the refs of a git repository; a malformed URL is bad configuration.
func openGit(raw string, getenv func(string) string) (authority.Store, func() error, error) {
	st, err := gitref.Open(raw, getenv)
	if err != nil {
		return nil, nil, usageErrorf("%v", err)
	}
	return st, noClose, nil
}

func migrateStore(ctx context.Context, c *cmdEnv) error {
	st, closeFn, err := openStore(ctx, c.s.store, storeCreate, c.io.Getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	var report any
	switch s := st.(type) {
	case *bolt.Store:
		if err := s.Migrate(ctx); err != nil {
			return err
		}
		report = map[string]any{"path": s.Path(), "schema_version": bolt.SchemaVersion}
		if !c.s.jsonOut {
			c.printf("bolt store %s is at schema version %d\n", s.Path(), bolt.SchemaVersion)
		}
	case *dynamo.Store:
		rep, err := s.Migrate(ctx)
		if err != nil {
			return err
		}
		report = rep
		if !c.s.jsonOut {
			c.printf("%s\n", rep)
		}
	default:
		c.printf("%s needs no migration\n", c.s.store)
		return nil
	}
	moved, total, err := compactAll(ctx, authority.New(st, authority.WithLogger(c.log)), st)
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"store": report, "environments": total, "moved": moved})
	}
	c.printf("%d environments; %d had history in their document, now kept as records\n", total, moved)
	return nil
}

// compactAll moves what every environment's document still holds of its history (a document of the
// first layout, or an outbox a crash left) into records. Run again, it finds nothing to move.
func compactAll(ctx context.Context, a *authority.Authority, st authority.Store) (moved, total int, err error) {
	lister, ok := st.(interface {
		Environments(ctx context.Context) ([]string, error)
	})
	if !ok {
		return 0, 0, nil
	}
	envs, err := lister.Environments(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, env := range envs {
		wrote, err := a.Compact(ctx, env)
		if err != nil {
			return moved, len(envs), err
		}
		if wrote {
			moved++
		}
	}
	return moved, len(envs), nil
}
